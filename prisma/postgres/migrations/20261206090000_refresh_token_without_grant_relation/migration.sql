-- Refresh tokens keep their grantId without a relation or an index, as access tokens do: every use
-- reads the grant with the token, nothing finds tokens by grant, and every refresh wrote that index
-- (bench row (w)).
-- DropForeignKey
ALTER TABLE "RefreshToken" DROP CONSTRAINT "RefreshToken_grantId_fkey";

-- DropIndex
DROP INDEX "RefreshToken_grantId_idx";

