-- AlterTable
ALTER TABLE "UpstreamSession" ADD COLUMN "facts" TEXT;

