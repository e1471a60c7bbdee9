// The text the hot store writes a date as (date-text.ts), on both databases: Prisma's encoding on
// SQLite, toISOString's text with "+00:00" for its "Z", built from the date's fields; for every
// date, the same text as toISOString's, and an invalid date still refused. PostgreSQL's
// timestamp(3) reads that text as the same UTC wall time whatever the session's time zone.
import { describe, expect, it } from "@jest/globals";
import pg from "pg";
import { dateText } from "../../src/store/date-text.ts";
import { postgresAvailable } from "../support/pg-database.ts";

const viaIso = (date: Date) => `${date.toISOString().slice(0, -1)}+00:00`;

describe("a date as the hot store writes it", () => {
  it("reads as toISOString's text, with +00:00", () => {
    expect(dateText(new Date("2031-05-06T07:08:09.123Z"))).toBe("2031-05-06T07:08:09.123+00:00");
    expect(dateText(new Date("2031-12-31T23:59:59.009Z"))).toBe("2031-12-31T23:59:59.009+00:00");
    expect(dateText(new Date("2031-01-01T00:00:00.090Z"))).toBe("2031-01-01T00:00:00.090+00:00");
  });

  it("is toISOString's text for every field's edges and years outside 1000-9999", () => {
    const edges = [
      "1000-01-01T00:00:00.000Z",
      "0999-12-31T23:59:59.999Z",
      "9999-12-31T23:59:59.999Z",
      "+010000-01-01T00:00:00.000Z",
      "-000001-06-15T12:30:45.500Z",
      "1970-01-01T00:00:00.000Z",
      "2024-02-29T09:05:07.001Z",
    ].map((text) => new Date(text));
    // A millisecond stride that is prime to every field's length walks through their values.
    const spread = Array.from({ length: 20_000 }, (_, i) => new Date(Date.UTC(1990, 0, 1) + i * 7_777_777_777 + i * 37));
    const differing = [...edges, ...spread].filter((date) => dateText(date) !== viaIso(date)).map(viaIso);
    expect(differing).toEqual([]);
  });

  it("refuses an invalid date, as toISOString does", () => {
    expect(() => dateText(new Date(Number.NaN))).toThrow(RangeError);
  });

  // The zone in the text is ignored by timestamp(3): a session far from UTC (+13:45) must not shift it.
  (postgresAvailable ? it : it.skip)("is the same UTC wall time to PostgreSQL's timestamp(3), whatever the session's time zone", async () => {
    const client = new pg.Client({ connectionString: `${process.env.MAB_TEST_POSTGRES_URL}/postgres` });
    await client.connect();
    try {
      await client.query("SET TimeZone = 'Pacific/Chatham'");
      const dates = ["2031-05-06T07:08:09.123Z", "2031-01-01T00:00:00.090Z", "2024-02-29T23:59:59.999Z", "1970-01-01T00:00:00.000Z"].map((t) => new Date(t));
      const read = await Promise.all(
        dates.map(async (date) => {
          const { rows } = await client.query<{ text: string }>(`SELECT to_char($1::timestamp(3), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS text`, [dateText(date)]);
          return rows[0]!.text;
        }),
      );
      expect(read).toEqual(dates.map((d) => d.toISOString()));
    } finally {
      await client.end();
    }
  });
});
