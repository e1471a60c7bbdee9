-- CreateIndex
CREATE INDEX "Grant_revokedAt_idx" ON "Grant"("revokedAt");

-- CreateIndex
CREATE INDEX "AccessToken_revokedAt_idx" ON "AccessToken"("revokedAt");

