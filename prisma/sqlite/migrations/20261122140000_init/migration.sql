-- CreateTable
CREATE TABLE "Client" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "secretHash" TEXT,
    "secretPrefix" TEXT,
    "redirectUris" TEXT NOT NULL,
    "tokenEndpointAuthMethod" TEXT NOT NULL,
    "grantTypes" TEXT NOT NULL,
    "responseTypes" TEXT NOT NULL,
    "scope" TEXT,
    "clientName" TEXT,
    "clientUri" TEXT,
    "logoUri" TEXT,
    "softwareId" TEXT,
    "softwareVersion" TEXT,
    "registrationType" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" DATETIME
);

-- CreateTable
CREATE TABLE "AuthTransaction" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "clientId" TEXT NOT NULL,
    "redirectUri" TEXT NOT NULL,
    "codeChallenge" TEXT NOT NULL,
    "codeChallengeMethod" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "state" TEXT,
    "browserSessionId" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "csrfHash" TEXT,
    "approvedAt" DATETIME,
    "upstreamState" TEXT,
    "upstreamNonce" TEXT,
    "upstreamVerifierEnc" TEXT,
    "protocolVersion" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    CONSTRAINT "AuthTransaction_clientId_fkey" FOREIGN KEY ("clientId") REFERENCES "Client" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Consent" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "browserSessionId" TEXT NOT NULL,
    "clientId" TEXT NOT NULL,
    "redirectUri" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    CONSTRAINT "Consent_clientId_fkey" FOREIGN KEY ("clientId") REFERENCES "Client" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "UpstreamSession" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "provider" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "login" TEXT,
    "email" TEXT,
    "profile" TEXT NOT NULL,
    "accessTokenEnc" TEXT NOT NULL,
    "refreshTokenEnc" TEXT,
    "idTokenEnc" TEXT,
    "scope" TEXT,
    "accessExpiresAt" DATETIME,
    "lastCheckedAt" DATETIME NOT NULL,
    "status" TEXT NOT NULL,
    "revokedAt" DATETIME,
    "revokedReason" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "Grant" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "clientId" TEXT NOT NULL,
    "upstreamSessionId" TEXT,
    "subject" TEXT,
    "kind" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" DATETIME NOT NULL,
    "idleExpiresAt" DATETIME NOT NULL,
    "absoluteExpiresAt" DATETIME NOT NULL,
    "revokedAt" DATETIME,
    "revokedReason" TEXT,
    CONSTRAINT "Grant_clientId_fkey" FOREIGN KEY ("clientId") REFERENCES "Client" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Grant_upstreamSessionId_fkey" FOREIGN KEY ("upstreamSessionId") REFERENCES "UpstreamSession" ("id") ON DELETE SET NULL ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "AuthorizationCode" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "codeHash" TEXT NOT NULL,
    "grantId" TEXT NOT NULL,
    "clientId" TEXT NOT NULL,
    "redirectUri" TEXT NOT NULL,
    "codeChallenge" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL,
    "consumedAt" DATETIME,
    CONSTRAINT "AuthorizationCode_grantId_fkey" FOREIGN KEY ("grantId") REFERENCES "Grant" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "AccessToken" (
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
    "revokedAt" DATETIME,
    CONSTRAINT "AccessToken_grantId_fkey" FOREIGN KEY ("grantId") REFERENCES "Grant" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "RefreshToken" (
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
    "revokedAt" DATETIME,
    CONSTRAINT "RefreshToken_grantId_fkey" FOREIGN KEY ("grantId") REFERENCES "Grant" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "AuditEvent" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "type" TEXT NOT NULL,
    "clientId" TEXT,
    "grantId" TEXT,
    "subject" TEXT,
    "ip" TEXT,
    "detail" TEXT NOT NULL
);

-- CreateIndex
CREATE UNIQUE INDEX "AuthTransaction_upstreamState_key" ON "AuthTransaction"("upstreamState");

-- CreateIndex
CREATE INDEX "AuthTransaction_expiresAt_idx" ON "AuthTransaction"("expiresAt");

-- CreateIndex
CREATE INDEX "AuthTransaction_browserSessionId_idx" ON "AuthTransaction"("browserSessionId");

-- CreateIndex
CREATE INDEX "Consent_expiresAt_idx" ON "Consent"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "Consent_browserSessionId_clientId_redirectUri_scope_key" ON "Consent"("browserSessionId", "clientId", "redirectUri", "scope");

-- CreateIndex
CREATE INDEX "UpstreamSession_subject_idx" ON "UpstreamSession"("subject");

-- CreateIndex
CREATE INDEX "UpstreamSession_status_idx" ON "UpstreamSession"("status");

-- CreateIndex
CREATE INDEX "Grant_clientId_idx" ON "Grant"("clientId");

-- CreateIndex
CREATE INDEX "Grant_upstreamSessionId_idx" ON "Grant"("upstreamSessionId");

-- CreateIndex
CREATE INDEX "Grant_subject_idx" ON "Grant"("subject");

-- CreateIndex
CREATE INDEX "Grant_absoluteExpiresAt_idx" ON "Grant"("absoluteExpiresAt");

-- CreateIndex
CREATE INDEX "Grant_idleExpiresAt_idx" ON "Grant"("idleExpiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "AuthorizationCode_codeHash_key" ON "AuthorizationCode"("codeHash");

-- CreateIndex
CREATE INDEX "AuthorizationCode_grantId_idx" ON "AuthorizationCode"("grantId");

-- CreateIndex
CREATE INDEX "AuthorizationCode_expiresAt_idx" ON "AuthorizationCode"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "AccessToken_tokenHash_key" ON "AccessToken"("tokenHash");

-- CreateIndex
CREATE INDEX "AccessToken_grantId_idx" ON "AccessToken"("grantId");

-- CreateIndex
CREATE INDEX "AccessToken_expiresAt_idx" ON "AccessToken"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "RefreshToken_tokenHash_key" ON "RefreshToken"("tokenHash");

-- CreateIndex
CREATE UNIQUE INDEX "RefreshToken_successorId_key" ON "RefreshToken"("successorId");

-- CreateIndex
CREATE INDEX "RefreshToken_grantId_idx" ON "RefreshToken"("grantId");

-- CreateIndex
CREATE INDEX "RefreshToken_expiresAt_idx" ON "RefreshToken"("expiresAt");

-- CreateIndex
CREATE INDEX "AuditEvent_at_idx" ON "AuditEvent"("at");

-- CreateIndex
CREATE INDEX "AuditEvent_type_idx" ON "AuditEvent"("type");

-- CreateIndex
CREATE INDEX "AuditEvent_grantId_idx" ON "AuditEvent"("grantId");

