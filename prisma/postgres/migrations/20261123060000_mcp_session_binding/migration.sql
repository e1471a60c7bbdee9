-- CreateTable
CREATE TABLE "McpSession" (
    "sessionHash" TEXT NOT NULL,
    "owner" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "McpSession_pkey" PRIMARY KEY ("sessionHash")
);

-- CreateIndex
CREATE INDEX "McpSession_createdAt_idx" ON "McpSession"("createdAt");
