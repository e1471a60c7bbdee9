-- AlterTable
ALTER TABLE "AuthTransaction" ADD COLUMN "upstreamSessionId" TEXT;

-- CreateTable
CREATE TABLE "Connection" (
    "id" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "accountSubject" TEXT NOT NULL,
    "accountLogin" TEXT,
    "accessTokenEnc" TEXT NOT NULL,
    "refreshTokenEnc" TEXT,
    "scope" TEXT,
    "accessExpiresAt" TIMESTAMP(3),
    "status" TEXT NOT NULL,
    "revokedReason" TEXT,
    "refreshingUntil" TIMESTAMP(3),
    "lastCheckedAt" TIMESTAMP(3) NOT NULL,
    "lastUsedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Connection_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ConnectAttempt" (
    "id" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "browserSessionId" TEXT NOT NULL,
    "verifierEnc" TEXT,
    "nonce" TEXT,
    "transactionId" TEXT,
    "status" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "ConnectAttempt_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "Connection_subject_name_key" ON "Connection"("subject", "name");

-- CreateIndex
CREATE UNIQUE INDEX "ConnectAttempt_state_key" ON "ConnectAttempt"("state");

-- CreateIndex
CREATE INDEX "ConnectAttempt_expiresAt_idx" ON "ConnectAttempt"("expiresAt");
