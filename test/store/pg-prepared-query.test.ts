// The hot store's PostgreSQL statements as a pg Submittable (store/pg-prepared-query.ts), against
// the suite's PostgreSQL: the row description is asked for once per connection, not with every
// execution, and what pg's own Query did still holds: values parsed by type, errors that leave the
// pool usable, statements parsed again on a new connection. Several executions sent together run
// as one transaction, each with its own rows.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { utcTypes as types } from "../../src/store/hot-store-postgres.ts";
import { preparedExecutions, preparedRows } from "../../src/store/pg-prepared-query.ts";
import { createPostgresDatabase, postgresAvailable } from "../support/pg-database.ts";
import { until } from "../support/wait.ts";

const describeIf = postgresAvailable ? describe : describe.skip;
if (!postgresAvailable) process.stdout.write("[notice] PostgreSQL not available: prepared-query tests skipped\n");

describeIf("hot-store statements on PostgreSQL", () => {
  let url: string;
  let drop: () => Promise<void>;
  let pool: pg.Pool;
  /** Row descriptions the server sent on the pool's one connection. */
  let descriptions = 0;

  const SELECT_ROW = `SELECT $1::text AS "name", $2::int AS "n", $3::timestamp(3) AS "at", $4::text AS "nothing", $5::boolean AS "flag"`;

  beforeAll(async () => {
    ({ url, drop } = await createPostgresDatabase({ migrated: false }));
    // One connection: every statement below runs on it, until a test ends it.
    pool = new pg.Pool({ connectionString: url, max: 1 });
    // As the store's own pool does (hot-store-postgres.ts): a connection the server ends while it sits
    // idle (the teardown's forced DROP DATABASE can reach one still closing after pool.end())
    // emits an error on the pool, which without a listener fails whichever test is running.
    pool.on("error", () => undefined);
    pool.on("connect", (client) => {
      (client as unknown as { connection: pg.Connection }).connection.on("rowDescription", () => descriptions++);
    });
    await pool.query(`CREATE TABLE "Item" ("id" text PRIMARY KEY, "at" timestamp(3) NOT NULL)`);
  });

  afterAll(async () => {
    await pool.end();
    await drop();
  });

  it("parses each value by its type: text, integer, UTC timestamp, null, boolean", async () => {
    const rows = await preparedRows(pool, types, "selectRow", SELECT_ROW, ["a", 7, "2031-05-06T07:08:09.123Z", null, true]);
    expect(rows).toEqual([["a", 7, new Date("2031-05-06T07:08:09.123Z"), null, true]]);
  });

  it("asks for the row description once per connection, not with every execution", async () => {
    const before = descriptions;
    for (let i = 0; i < 3; i++) {
      const [row] = await preparedRows(pool, types, "selectRowAgain", SELECT_ROW, [`x${i}`, i, "2031-05-06T07:08:09.123Z", null, false]);
      expect(row).toEqual([`x${i}`, i, new Date("2031-05-06T07:08:09.123Z"), null, false]);
    }
    expect(descriptions - before).toBe(1);
  });

  it("returns no rows for a statement without a result, and many for one with several", async () => {
    expect(await preparedRows(pool, types, "insertItem", `INSERT INTO "Item" VALUES ($1, $2::timestamp(3))`, ["i1", "2031-01-01T00:00:00.000Z"])).toEqual([]);
    await preparedRows(pool, types, "insertItem", `INSERT INTO "Item" VALUES ($1, $2::timestamp(3))`, ["i2", "2031-01-02T00:00:00.000Z"]);
    expect(await preparedRows(pool, types, "items", `SELECT "id", "at" FROM "Item" ORDER BY "id"`, [])).toEqual([
      ["i1", new Date("2031-01-01T00:00:00.000Z")],
      ["i2", new Date("2031-01-02T00:00:00.000Z")],
    ]);
  });

  it("rejects with the server's error, and the next statement runs (a new connection parses and describes again)", async () => {
    const insert = `INSERT INTO "Item" VALUES ($1, $2::timestamp(3))`;
    await preparedRows(pool, types, "insertDuplicate", insert, ["dup", "2031-01-01T00:00:00.000Z"]);
    await expect(preparedRows(pool, types, "insertDuplicate", insert, ["dup", "2031-01-01T00:00:00.000Z"])).rejects.toMatchObject({ code: "23505" });
    const before = descriptions;
    expect(await preparedRows(pool, types, "selectRow", SELECT_ROW, ["after", 1, "2031-05-06T07:08:09.123Z", "y", true])).toEqual([
      ["after", 1, new Date("2031-05-06T07:08:09.123Z"), "y", true],
    ]);
    // The failed statement's connection was closed (as pool.query does): this one described anew.
    expect(descriptions - before).toBe(1);
  });

  it("refuses a parameter it cannot send as text before writing anything, and the pool stays usable", async () => {
    await expect(preparedRows(pool, types, "selectRow", SELECT_ROW, [{ not: "text" }, 1, "2031-05-06T07:08:09.123Z", null, true])).rejects.toThrow(
      "a hot-store parameter must be a string, number, boolean or null, not object",
    );
    expect(await preparedRows(pool, types, "selectRow", SELECT_ROW, ["ok", 2, "2031-05-06T07:08:09.123Z", null, false])).toEqual([
      ["ok", 2, new Date("2031-05-06T07:08:09.123Z"), null, false],
    ]);
  });

  it("rejects a statement whose session the server ends while it runs, and the next one runs on a new session", async () => {
    const [[pid]] = (await preparedRows(pool, types, "backend", "SELECT pg_backend_pid()", [])) as [[number]];
    const sleeping = preparedRows(pool, types, "sleep", "SELECT pg_sleep(30)", []);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      // Ended before it started, the statement would never begin: wait for the server to run it.
      await until(
        async () =>
          ((await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep%' AND state = 'active'", [pid])).rowCount ?? 0) > 0,
        "the server to run pg_sleep",
      );
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    } finally {
      await admin.end();
    }
    await expect(sleeping).rejects.toMatchObject({ code: "57P01" });
    const [[after]] = (await preparedRows(pool, types, "backend", "SELECT pg_backend_pid()", [])) as [[number]];
    expect(after).not.toBe(pid);
  });

  it("runs executions sent together as one transaction, each with its own rows, a statement used twice parsed and described once", async () => {
    const insert = `INSERT INTO "Item" VALUES ($1, $2::timestamp(3)) RETURNING "id", xmin::text`;
    // selectRow described on this connection first: the group below describes insertReturning alone.
    await preparedRows(pool, types, "selectRow", SELECT_ROW, ["before", 1, "2031-05-06T07:08:09.123Z", null, true]);
    const before = descriptions;
    const results = await preparedExecutions(pool, types, [
      { name: "insertReturning", text: insert, values: ["g1", "2031-01-01T00:00:00.000Z"] },
      { name: "selectRow", text: SELECT_ROW, values: ["between", 3, "2031-05-06T07:08:09.123Z", null, true] },
      { name: "insertReturning", text: insert, values: ["g2", "2031-01-02T00:00:00.000Z"] },
    ]);
    const [[first], between, [second]] = results as [[[string, string]], unknown[][], [[string, string]]];
    expect(first[0]).toBe("g1");
    expect(between).toEqual([["between", 3, new Date("2031-05-06T07:08:09.123Z"), null, true]]);
    expect(second[0]).toBe("g2");
    // One transaction: both rows carry its id.
    expect(second[1]).toBe(first[1]);
    // insertReturning was described once for both of its executions.
    expect(descriptions - before).toBe(1);
    const again = await preparedExecutions(pool, types, [{ name: "insertReturning", text: insert, values: ["g3", "2031-01-03T00:00:00.000Z"] }]);
    expect(again[0]![0]![0]).toBe("g3");
    expect(descriptions - before).toBe(1);
  });

  it("rolls back every execution sent together when one fails", async () => {
    const insert = `INSERT INTO "Item" VALUES ($1, $2::timestamp(3))`;
    await expect(
      preparedExecutions(pool, types, [
        { name: "insertTogether", text: insert, values: ["t1", "2031-01-01T00:00:00.000Z"] },
        { name: "insertTogether", text: insert, values: ["t1", "2031-01-01T00:00:00.000Z"] },
      ]),
    ).rejects.toMatchObject({ code: "23505" });
    expect(await preparedRows(pool, types, "itemById", `SELECT "id" FROM "Item" WHERE "id" = $1`, ["t1"])).toEqual([]);
  });

  it("reports a statement the server cannot parse, and parses it again when it is asked for again", async () => {
    await expect(preparedRows(pool, types, "broken", `SELECT "missing" FROM "Item"`, [])).rejects.toMatchObject({ code: "42703" });
    await expect(preparedRows(pool, types, "broken", `SELECT "missing" FROM "Item"`, [])).rejects.toMatchObject({ code: "42703" });
  });
});
