-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_Consent" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "browserSessionId" TEXT NOT NULL,
    "clientId" TEXT NOT NULL,
    "redirectUri" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "resource" TEXT NOT NULL DEFAULT '',
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    CONSTRAINT "Consent_clientId_fkey" FOREIGN KEY ("clientId") REFERENCES "Client" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_Consent" ("browserSessionId", "clientId", "createdAt", "expiresAt", "id", "redirectUri", "scope") SELECT "browserSessionId", "clientId", "createdAt", "expiresAt", "id", "redirectUri", "scope" FROM "Consent";
DROP TABLE "Consent";
ALTER TABLE "new_Consent" RENAME TO "Consent";
CREATE INDEX "Consent_expiresAt_idx" ON "Consent"("expiresAt");
CREATE UNIQUE INDEX "Consent_browserSessionId_clientId_redirectUri_scope_resource_key" ON "Consent"("browserSessionId", "clientId", "redirectUri", "scope", "resource");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

