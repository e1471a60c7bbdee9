-- CreateIndex
CREATE INDEX "Client_registrationType_lastUsedAt_createdAt_idx" ON "Client"("registrationType", "lastUsedAt", "createdAt");

-- CreateIndex
CREATE INDEX "AuditEvent_clientId_idx" ON "AuditEvent"("clientId");

