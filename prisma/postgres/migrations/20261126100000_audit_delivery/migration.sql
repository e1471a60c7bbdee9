-- AlterTable
ALTER TABLE "AuditEvent" ADD COLUMN     "deliveredAt" TIMESTAMP(3);

-- CreateIndex
CREATE INDEX "AuditEvent_deliveredAt_at_id_idx" ON "AuditEvent"("deliveredAt", "at", "id");
