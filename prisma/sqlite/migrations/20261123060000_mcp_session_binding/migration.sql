-- CreateTable
CREATE TABLE "McpSession" (
    "sessionHash" TEXT NOT NULL PRIMARY KEY,
    "owner" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- CreateIndex
CREATE INDEX "McpSession_createdAt_idx" ON "McpSession"("createdAt");

