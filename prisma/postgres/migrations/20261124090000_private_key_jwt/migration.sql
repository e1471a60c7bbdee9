-- AlterTable
ALTER TABLE "Client" ADD COLUMN     "applicationType" TEXT,
ADD COLUMN     "fallbackAuthMethod" TEXT,
ADD COLUMN     "jwks" TEXT,
ADD COLUMN     "jwksUri" TEXT,
ADD COLUMN     "signingAlg" TEXT;

-- CreateTable
CREATE TABLE "UsedAssertion" (
    "key" TEXT NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "UsedAssertion_pkey" PRIMARY KEY ("key")
);

-- CreateIndex
CREATE INDEX "UsedAssertion_expiresAt_idx" ON "UsedAssertion"("expiresAt");

