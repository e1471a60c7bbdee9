-- CreateTable
CREATE TABLE "BrowserIdentity" (
    "browserSessionId" TEXT NOT NULL PRIMARY KEY,
    "subject" TEXT NOT NULL,
    "login" TEXT,
    "provider" TEXT NOT NULL,
    "signedInAt" DATETIME NOT NULL,
    "expiresAt" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "AccountLogin" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "browserSessionId" TEXT NOT NULL,
    "upstreamState" TEXT NOT NULL,
    "upstreamNonce" TEXT,
    "upstreamVerifierEnc" TEXT,
    "status" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE INDEX "BrowserIdentity_subject_idx" ON "BrowserIdentity"("subject");

-- CreateIndex
CREATE INDEX "BrowserIdentity_expiresAt_idx" ON "BrowserIdentity"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "AccountLogin_upstreamState_key" ON "AccountLogin"("upstreamState");

-- CreateIndex
CREATE INDEX "AccountLogin_expiresAt_idx" ON "AccountLogin"("expiresAt");

