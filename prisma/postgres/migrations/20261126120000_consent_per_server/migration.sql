-- DropIndex
DROP INDEX "Consent_browserSessionId_clientId_redirectUri_scope_key";

-- AlterTable
ALTER TABLE "Consent" ADD COLUMN     "resource" TEXT NOT NULL DEFAULT '';

-- CreateIndex
CREATE UNIQUE INDEX "Consent_browserSessionId_clientId_redirectUri_scope_resource_key" ON "Consent"("browserSessionId", "clientId", "redirectUri", "scope", "resource");
