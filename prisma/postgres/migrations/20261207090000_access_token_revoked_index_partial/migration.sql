-- The index of the revocation feed on AccessToken.revokedAt holds only revoked tokens. Every
-- refresh and code exchange inserts an access token with no revokedAt, and each such insert wrote a
-- NULL entry into this index (bench row (w)). The feed and the sweep only ever ask for revokedAt
-- after or before a time, which implies it is set, so both databases still use the index for them.
-- The Prisma schema keeps @@index([revokedAt]): Prisma 6 compares an index by its columns and
-- cannot spell its WHERE, so the predicate lives here (test/store/partial-indexes.test.ts checks
-- that it stays). No semicolon in these comments: the PostgreSQL adapter splits the script at
-- each one, comments included.
DROP INDEX "AccessToken_revokedAt_idx";
CREATE INDEX "AccessToken_revokedAt_idx" ON "AccessToken"("revokedAt") WHERE "revokedAt" IS NOT NULL;
