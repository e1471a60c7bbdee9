-- DropIndex
DROP INDEX "AuditEvent_clientId_idx";
