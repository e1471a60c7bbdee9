-- AlterTable
ALTER TABLE "Client" ADD COLUMN "applicationType" TEXT;
ALTER TABLE "Client" ADD COLUMN "fallbackAuthMethod" TEXT;
ALTER TABLE "Client" ADD COLUMN "jwks" TEXT;
ALTER TABLE "Client" ADD COLUMN "jwksUri" TEXT;
ALTER TABLE "Client" ADD COLUMN "signingAlg" TEXT;

-- CreateTable
CREATE TABLE "UsedAssertion" (
    "key" TEXT NOT NULL PRIMARY KEY,
    "expiresAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE INDEX "UsedAssertion_expiresAt_idx" ON "UsedAssertion"("expiresAt");

