-- Room on each page for the one update every refresh token gets (its claim), so that it stays
-- heap-only (bench row (g)).
ALTER TABLE "RefreshToken" SET (fillfactor = 50);
