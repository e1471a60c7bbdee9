-- Access tokens keep their grantId without a relation or an index: validation reads the grant
-- with the token, nothing finds tokens by grant, and every refresh wrote that index (bench row (w)).
-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_AccessToken" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "tokenHash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "grantId" TEXT NOT NULL,
    "clientId" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "refreshTokenId" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    "revokedAt" DATETIME
);
INSERT INTO "new_AccessToken" ("clientId", "createdAt", "expiresAt", "grantId", "id", "prefix", "refreshTokenId", "resource", "revokedAt", "scope", "tokenHash") SELECT "clientId", "createdAt", "expiresAt", "grantId", "id", "prefix", "refreshTokenId", "resource", "revokedAt", "scope", "tokenHash" FROM "AccessToken";
DROP TABLE "AccessToken";
ALTER TABLE "new_AccessToken" RENAME TO "AccessToken";
CREATE UNIQUE INDEX "AccessToken_tokenHash_key" ON "AccessToken"("tokenHash");
CREATE INDEX "AccessToken_expiresAt_idx" ON "AccessToken"("expiresAt");
CREATE INDEX "AccessToken_revokedAt_idx" ON "AccessToken"("revokedAt");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

