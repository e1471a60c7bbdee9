-- DropIndex
DROP INDEX "AuditEvent_grantId_idx";

