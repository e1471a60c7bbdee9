-- AlterTable
ALTER TABLE "AuditEvent" ADD COLUMN "deliveredAt" DATETIME;

-- CreateIndex
CREATE INDEX "AuditEvent_deliveredAt_at_id_idx" ON "AuditEvent"("deliveredAt", "at", "id");

