-- AlterTable
ALTER TABLE "AuthTransaction" ADD COLUMN "upstreamSessionId" TEXT;

-- CreateTable
CREATE TABLE "Connection" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "subject" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "accountSubject" TEXT NOT NULL,
    "accountLogin" TEXT,
    "accessTokenEnc" TEXT NOT NULL,
    "refreshTokenEnc" TEXT,
    "scope" TEXT,
    "accessExpiresAt" DATETIME,
    "status" TEXT NOT NULL,
    "revokedReason" TEXT,
    "refreshingUntil" DATETIME,
    "lastCheckedAt" DATETIME NOT NULL,
    "lastUsedAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "ConnectAttempt" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "state" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "browserSessionId" TEXT NOT NULL,
    "verifierEnc" TEXT,
    "nonce" TEXT,
    "transactionId" TEXT,
    "status" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE UNIQUE INDEX "Connection_subject_name_key" ON "Connection"("subject", "name");

-- CreateIndex
CREATE UNIQUE INDEX "ConnectAttempt_state_key" ON "ConnectAttempt"("state");

-- CreateIndex
CREATE INDEX "ConnectAttempt_expiresAt_idx" ON "ConnectAttempt"("expiresAt");

