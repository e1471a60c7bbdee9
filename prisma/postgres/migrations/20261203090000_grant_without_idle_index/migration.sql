-- DropIndex
DROP INDEX "Grant_idleExpiresAt_idx";
