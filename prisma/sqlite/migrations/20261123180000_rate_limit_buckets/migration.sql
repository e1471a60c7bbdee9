-- CreateTable
CREATE TABLE "RateLimitBucket" (
    "key" TEXT NOT NULL PRIMARY KEY,
    "fullAt" REAL NOT NULL
);

-- CreateIndex
CREATE INDEX "RateLimitBucket_fullAt_idx" ON "RateLimitBucket"("fullAt");

