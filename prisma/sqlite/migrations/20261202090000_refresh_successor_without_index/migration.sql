-- DropIndex
DROP INDEX "RefreshToken_successorId_key";
