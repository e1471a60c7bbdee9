-- Refresh tokens keep their grantId without a relation or an index, as access tokens do: every use
-- reads the grant with the token, nothing finds tokens by grant, and every refresh wrote that index
-- (bench row (w)).
-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_RefreshToken" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "tokenHash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "grantId" TEXT NOT NULL,
    "clientId" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "parentId" TEXT,
    "successorId" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    "consumedAt" DATETIME,
    "graceUntil" DATETIME,
    "firstUsedAt" DATETIME,
    "revokedAt" DATETIME
);
INSERT INTO "new_RefreshToken" ("clientId", "consumedAt", "createdAt", "expiresAt", "firstUsedAt", "graceUntil", "grantId", "id", "parentId", "prefix", "resource", "revokedAt", "scope", "successorId", "tokenHash") SELECT "clientId", "consumedAt", "createdAt", "expiresAt", "firstUsedAt", "graceUntil", "grantId", "id", "parentId", "prefix", "resource", "revokedAt", "scope", "successorId", "tokenHash" FROM "RefreshToken";
DROP TABLE "RefreshToken";
ALTER TABLE "new_RefreshToken" RENAME TO "RefreshToken";
CREATE UNIQUE INDEX "RefreshToken_tokenHash_key" ON "RefreshToken"("tokenHash");
CREATE INDEX "RefreshToken_expiresAt_idx" ON "RefreshToken"("expiresAt");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

