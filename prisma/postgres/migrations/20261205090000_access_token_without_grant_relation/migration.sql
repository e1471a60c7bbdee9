-- Access tokens keep their grantId without a relation or an index: validation reads the grant
-- with the token, nothing finds tokens by grant, and every refresh wrote that index (bench row (w)).
-- DropForeignKey
ALTER TABLE "AccessToken" DROP CONSTRAINT "AccessToken_grantId_fkey";

-- DropIndex
DROP INDEX "AccessToken_grantId_idx";

