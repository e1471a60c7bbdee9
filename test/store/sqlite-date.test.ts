// The text a date is stored as on SQLite (sqlite-hot-sql.ts): Prisma's encoding, toISOString's
// text with "+00:00" for its "Z", built from the date's fields; for every date, the same text as
// toISOString's, and an invalid date still refused.
import { describe, expect, it } from "@jest/globals";
import { sqliteDate } from "../../src/store/sqlite-hot-sql.ts";

const viaIso = (date: Date) => `${date.toISOString().slice(0, -1)}+00:00`;

describe("a date stored on SQLite", () => {
  it("reads as toISOString's text, with +00:00", () => {
    expect(sqliteDate(new Date("2031-05-06T07:08:09.123Z"))).toBe("2031-05-06T07:08:09.123+00:00");
    expect(sqliteDate(new Date("2031-12-31T23:59:59.009Z"))).toBe("2031-12-31T23:59:59.009+00:00");
    expect(sqliteDate(new Date("2031-01-01T00:00:00.090Z"))).toBe("2031-01-01T00:00:00.090+00:00");
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
    const differing = [...edges, ...spread].filter((date) => sqliteDate(date) !== viaIso(date)).map(viaIso);
    expect(differing).toEqual([]);
  });

  it("refuses an invalid date, as toISOString does", () => {
    expect(() => sqliteDate(new Date(Number.NaN))).toThrow(RangeError);
  });
});
