// A full disk under a running broker: /readyz must say what writes see. Its probe used to roll its
// write back (nothing reached the disk) and answered 200 while every real write got 503. The disk
// here is genuinely full: a small tmpfs filled to the last byte (root only; skipped elsewhere).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import path from "node:path";
import { copyMigratedSqlite } from "../support/template-db.ts";
import { mountSmallDisk, smallDiskAvailable, type SmallDisk } from "../support/small-disk.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { WriteFailures, WRITE_FAILURE_WINDOW_MS } from "../../src/store/readiness.ts";
import pg from "pg";
import { createPostgresDatabase, postgresAvailable, type TestPostgresDatabase } from "../support/pg-database.ts";

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

if (!smallDiskAvailable) process.stdout.write("[notice] cannot mount a tmpfs here (root only): full-disk tests skipped\n");

(smallDiskAvailable ? describe : describe.skip)("a SQLite database whose disk fills up", () => {
  let disk: SmallDisk;
  let t: TestBroker;
  const lines: LogLine[] = [];
  beforeAll(async () => {
    disk = mountSmallDisk(16);
    const file = path.join(disk.dir, "broker.db");
    await copyMigratedSqlite(file);
    const logDestination = {
      write(text: string) {
        for (const part of text.split("\n")) if (part) lines.push(JSON.parse(part) as LogLine);
      },
    };
    t = await startBroker({ DATABASE_URL: `file:${file}`, LOG_LEVEL: "info" }, { migrate: false, logDestination });
  });
  afterAll(async () => {
    await t?.stop();
    disk?.unmount();
  });

  const register = () =>
    fetch(`${t.url}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none", client_name: "x".repeat(200) }),
    });
  const readiness = () => lines.filter((l) => /ready/.test(l.msg) && l.msg !== "request");

  it("makes /readyz say 503 with the cause while writes get 503, logs the cause once, and recovers", async () => {
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    expect((await register()).status).toBe(201);

    disk.fill();
    let filled = true;
    try {
      const writes = await Promise.all(Array.from({ length: 5 }, register));
      for (const refused of writes) {
        expect(refused.status).toBe(503);
        expect(refused.headers.get("retry-after")).toBe("5");
      }
      for (let i = 0; i < 3; i++) {
        const notReady = await fetch(`${t.url}/readyz`);
        expect(notReady.status).toBe(503);
        expect(await notReady.json()).toEqual({
          status: "not ready",
          database: "not writable",
          reason: expect.stringMatching(/^the disk holding the database is full \(\d+ KiB free\)$/),
        });
      }
      // Three probes, one line: the cause, at warn.
      expect(readiness()).toEqual([
        expect.objectContaining({ level: 40, msg: "not ready: /readyz answers 503", cause: expect.stringMatching(/disk .* full/) }),
      ]);
      disk.free();
      filled = false;
    } finally {
      if (filled) disk.free();
    }
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    expect((await register()).status).toBe(201);
    expect(readiness().at(-1)).toMatchObject({ level: 30, msg: "ready again: the database answers and takes writes" });
  }, 60_000);
});

(postgresAvailable ? describe : describe.skip)("a PostgreSQL server that refuses writes for a full disk", () => {
  let database: TestPostgresDatabase;
  let t: TestBroker;
  beforeAll(async () => {
    database = await createPostgresDatabase();
    t = await startBroker({ DATABASE_URL: database.url });
  });
  afterAll(async () => {
    await t?.stop();
    await database?.drop();
  });

  it("makes /readyz say 503 with the server's own reason once a write was refused so", async () => {
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    // The server's answer when it cannot extend a table's file (SQLSTATE 53100), for new clients.
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      await admin.query(`CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`);
      await admin.query(`CREATE TRIGGER full_disk BEFORE INSERT ON "Client" FOR EACH ROW EXECUTE FUNCTION full_disk()`);
    } finally {
      await admin.end();
    }
    const refused = await fetch(`${t.url}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none" }),
    });
    expect(refused.status).toBe(503);
    const notReady = await fetch(`${t.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({
      status: "not ready",
      database: "not writable",
      reason: "a write failed: the PostgreSQL server's disk is full (53100 disk_full)",
    });
  });
});

describe("write failures no probe can see", () => {
  it("are reported while recent, and no longer once a write went through or the window passed", () => {
    let now = 1_000_000;
    const failures = new WriteFailures(() => now);
    // PostgreSQL's own error for a full disk, as pg reports it.
    const diskFull = Object.assign(new Error("could not extend file: No space left on device"), { severity: "ERROR", code: "53100" });
    failures.observe(Object.assign(new Error("lock"), { severity: "ERROR", code: "55P03" }));
    expect(failures.recent()).toBeUndefined();
    failures.observe(diskFull);
    expect(failures.recent()).toBe("a write failed: the PostgreSQL server's disk is full (53100 disk_full)");
    now += WRITE_FAILURE_WINDOW_MS - 1;
    expect(failures.recent()).toBeDefined();
    now += 1;
    expect(failures.recent()).toBeUndefined();
    failures.observe(diskFull);
    failures.clear();
    expect(failures.recent()).toBeUndefined();
  });
});
