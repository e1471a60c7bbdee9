// Group commit on SQLite, driven directly on a connection as the writer thread drives it
// (test/store/sqlite-writer.test.ts and hot-store.test.ts go through the thread): a group is one
// transaction, a write that fails takes back only its own changes, and a lock that outlasts
// busy_timeout fails the whole group (test/gateway/fault-survival.test.ts shows it costs one wait).
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "@jest/globals";
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { commitGroup, type WriteOutcome } from "../../src/store/sqlite-group-commit.ts";
import { HotConnection } from "../../src/store/sqlite-hot-sql.ts";
import { hotWriteRequest, type HotWriteRequest } from "../../src/store/sqlite-hot-writes.ts";
import { copyMigratedSqlite } from "../support/template-db.ts";

const T0 = new Date("2031-05-06T07:08:09.123Z");
const claim = (sessionHash: string, owner = "github:1"): HotWriteRequest => hotWriteRequest("claimMcpSession", { sessionHash, owner, createdAt: T0 });

describe("group commit on SQLite", () => {
  let dir: string;
  let file: string;
  let connection: HotConnection;
  let reader: Database.Database;
  let n = 0;

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-group-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeEach(async () => {
    file = path.join(dir, `broker-${++n}.db`);
    await copyMigratedSqlite(file);
    connection = new HotConnection(file);
    reader = new Database(file);
    // Refuses one owner's claims, so that a write of a group can fail on demand.
    reader.exec(`CREATE TRIGGER refuse_claim BEFORE INSERT ON "McpSession" WHEN NEW.owner = 'refused' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
  });
  afterEach(() => {
    connection.close();
    reader.close();
  });

  const stored = () => (reader.prepare(`SELECT "sessionHash" FROM "McpSession" ORDER BY "sessionHash"`).raw(true).all() as string[][]).map((r) => r[0]);
  /** Frames in the WAL so far: every commit appends the pages it changed plus a commit frame. */
  const walFrames = () => (connection.db().prepare("PRAGMA wal_checkpoint(NOOP)").raw(true).get() as number[])[1]!;
  const failed = (outcome: WriteOutcome | undefined) => {
    if (!outcome || outcome.ok) throw new Error(`expected a failed outcome, got ${JSON.stringify(outcome)}`);
    return outcome.error;
  };

  it("commits a group as one transaction, answering each write in order", () => {
    const writes = ["a1", "a2", "a3", "a4"].map((h) => claim(h));
    const before = walFrames();
    expect(commitGroup(connection, writes)).toEqual(writes.map(() => ({ ok: true, value: "github:1" })));
    const grouped = walFrames() - before;
    for (const h of ["b1", "b2", "b3", "b4"]) commitGroup(connection, [claim(h)]);
    const oneByOne = walFrames() - before - grouped;
    expect(stored()).toEqual(["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]);
    // One commit's pages for the group against four commits' for the same writes one by one.
    expect(grouped * 2).toBeLessThanOrEqual(oneByOne);
  });

  it("takes back only the failing write's changes; the others commit", () => {
    const outcomes = commitGroup(connection, [claim("c1"), claim("c2", "refused"), claim("c3")]);
    expect(outcomes[0]).toEqual({ ok: true, value: "github:1" });
    expect(outcomes[2]).toEqual({ ok: true, value: "github:1" });
    // The error as it crosses back to the event-loop thread: what store/errors.ts classifies by.
    const error = failed(outcomes[1]);
    expect(error.message).toContain("refused by the test");
    expect(error.code).toBe("SQLITE_CONSTRAINT_TRIGGER");
    expect(typeof error.rawCode).toBe("number");
    expect(stored()).toEqual(["c1", "c3"]);
  });

  it("answers a lone failing write with its own error", () => {
    const [outcome] = commitGroup(connection, [claim("d1", "refused")]);
    expect(failed(outcome).message).toContain("refused by the test");
    expect(stored()).toEqual([]);
  });

  it("fails every write of the group when another connection holds the lock past busy_timeout, and stays usable", () => {
    // A short wait here, so the test does not sit out the broker's 5 s.
    connection.db().prepare("PRAGMA busy_timeout = 20").get();
    const holder = new Database(file);
    holder.exec("BEGIN IMMEDIATE");
    try {
      const outcomes = commitGroup(connection, [claim("e1"), claim("e2"), claim("e3")]);
      const errors = outcomes.map(failed);
      expect(errors.map((e) => e.code)).toEqual(["SQLITE_BUSY", "SQLITE_BUSY", "SQLITE_BUSY"]);
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    expect(stored()).toEqual([]);
    // The connection is not left inside a transaction: the next group commits.
    expect(commitGroup(connection, [claim("e4")])).toEqual([{ ok: true, value: "github:1" }]);
    expect(stored()).toEqual(["e4"]);
  });
});
