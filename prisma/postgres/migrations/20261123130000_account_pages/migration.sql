-- CreateTable
CREATE TABLE "BrowserIdentity" (
    "browserSessionId" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "login" TEXT,
    "provider" TEXT NOT NULL,
    "signedInAt" TIMESTAMP(3) NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "BrowserIdentity_pkey" PRIMARY KEY ("browserSessionId")
);

-- CreateTable
CREATE TABLE "AccountLogin" (
    "id" TEXT NOT NULL,
    "browserSessionId" TEXT NOT NULL,
    "upstreamState" TEXT NOT NULL,
    "upstreamNonce" TEXT,
    "upstreamVerifierEnc" TEXT,
    "status" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "AccountLogin_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "BrowserIdentity_subject_idx" ON "BrowserIdentity"("subject");

-- CreateIndex
CREATE INDEX "BrowserIdentity_expiresAt_idx" ON "BrowserIdentity"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "AccountLogin_upstreamState_key" ON "AccountLogin"("upstreamState");

-- CreateIndex
CREATE INDEX "AccountLogin_expiresAt_idx" ON "AccountLogin"("expiresAt");

