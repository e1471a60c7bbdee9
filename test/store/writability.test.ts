// A database this process cannot write: the broker refuses to start on it with one line saying
// what to change, /readyz says 503 with the reason, and writes that fail because of it answer 503
// with Retry-After instead of 500. Every read-only database here is genuinely read-only:
// - tests run as root here, and file modes do not stop root: checks that need "a user who cannot
//   write" run as `nobody` (runuser) on files chmod'ed 0444 in folders 0555 (run as a normal user,
//   the test process itself is that user);
// - for a broker running in this process, root makes the files immutable (chattr +i; even root
//   cannot write them, verified below before use); a normal user chmods them;
// - PostgreSQL: default_transaction_read_only on the database, as on a read-only replica.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "libsql";
import pg from "pg";
import { PrismaPg } from "@prisma/adapter-pg";
import { openDatabase } from "../../src/store/db.ts";
import { DatabaseNotWritableError } from "../../src/store/writability.ts";
import { isDatabaseUnavailable, postgresSqlState, sqliteCannotWriteCode } from "../../src/store/errors.ts";
import { PrismaClient as PostgresClient } from "../../src/store/generated/postgres/client.ts";
import { PrismaClient as SqliteClient } from "../../src/store/generated/sqlite/client.ts";
import { ConfiguredPrismaLibSQL } from "../../src/store/sqlite-connections.ts";
import { cleanEnv, projectRoot, runToEnd, serverEntry, tsxBin } from "../support/spawn.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { createPostgresDatabase, postgresAvailable, type TestPostgresDatabase } from "../support/pg-database.ts";
import { isRoot, makeUnwritable, mechanism } from "../support/unwritable.ts";
import { copyMigratedSqlite } from "../support/template-db.ts";

/** Runs a command as a user who cannot write root's 0444 files: nobody when we are root, else ourselves. */
function asUnprivileged(command: string, args: string[]): [string, string[]] {
  return isRoot ? ["runuser", ["-u", "nobody", "--", command, ...args]] : [command, args];
}
// nobody must also reach the project (a checkout inside a 0700 folder is out of its reach).
const unprivilegedAvailable = !isRoot || spawnSync("runuser", ["-u", "nobody", "--", "test", "-x", tsxBin]).status === 0;

if (!mechanism) process.stdout.write("[notice] chattr +i does not work on this file system as root: in-process read-only tests skipped\n");
if (!unprivilegedAvailable) process.stdout.write("[notice] runuser -u nobody is not available, or cannot reach this checkout: start-check tests skipped\n");

/** /readyz of the broker at `url` says 503: the database is not writable, for `reason`. */
async function expectNotWritable(url: string, reason: string): Promise<void> {
  const notReady = await fetch(`${url}/readyz`);
  expect(notReady.status).toBe(503);
  expect(await notReady.json()).toEqual({ status: "not ready", database: "not writable", reason });
}

describe("isDatabaseUnavailable with errors from real SQLite", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-sqlite-errors-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("recognises SQLITE_READONLY from a write on a read-only connection", () => {
    const file = path.join(dir, "ro.db");
    new Database(file).exec("CREATE TABLE t (x INTEGER)");
    const readOnly = new Database(`file:${file}?mode=ro`);
    let error: unknown;
    try {
      readOnly.exec("INSERT INTO t VALUES (1)");
    } catch (err) {
      error = err;
    }
    expect(error).toMatchObject({ code: "SQLITE_READONLY", rawCode: 8 });
    expect(sqliteCannotWriteCode(error)).toBe("SQLITE_READONLY");
    expect(isDatabaseUnavailable(error)).toBe(true);
    readOnly.close();
  });

  it("recognises SQLITE_BUSY from a write while another connection holds the lock", () => {
    const file = path.join(dir, "busy.db");
    const holder = new Database(file);
    holder.prepare("PRAGMA journal_mode = WAL").get();
    holder.exec("CREATE TABLE t (x INTEGER); BEGIN IMMEDIATE");
    const other = new Database(file);
    other.prepare("PRAGMA busy_timeout = 0").get();
    let error: unknown;
    try {
      other.exec("INSERT INTO t VALUES (1)");
    } catch (err) {
      error = err;
    }
    holder.exec("ROLLBACK");
    expect(error).toMatchObject({ code: "SQLITE_BUSY" });
    expect(isDatabaseUnavailable(error)).toBe(true);
    holder.close();
    other.close();
  });

  it("does not take ordinary SQL errors for an unavailable database", async () => {
    const database = await openDatabase(`file:${path.join(dir, "plain.db")}`);
    try {
      await database.db.$executeRawUnsafe("CREATE TABLE u (x INTEGER UNIQUE)");
      await database.db.$executeRawUnsafe("INSERT INTO u VALUES (1)");
      const duplicate = await database.db.$executeRawUnsafe("INSERT INTO u VALUES (1)").catch((err: unknown) => err);
      const syntax = await database.db.$executeRawUnsafe("INSERT INTO nowhere VALUES (1)").catch((err: unknown) => err);
      expect(duplicate).toBeInstanceOf(Error);
      expect(syntax).toBeInstanceOf(Error);
      expect(isDatabaseUnavailable(duplicate)).toBe(false);
      expect(isDatabaseUnavailable(syntax)).toBe(false);
    } finally {
      await database.close();
    }
  });

  (mechanism ? it : it.skip)(
    "recognises the errors Prisma raises when the file becomes unwritable under it, and writes work again once it is writable",
    async () => {
      const file = path.join(dir, "immutable.db");
      const database = await openDatabase(`file:${file}`);
      await database.db.$executeRawUnsafe("CREATE TABLE t (x INTEGER)");
      expect(existsSync(`${file}-wal`)).toBe(true);
      const undo = makeUnwritable([file, `${file}-wal`]);
      let undone = false;
      try {
        const plain = await database.db.$executeRawUnsafe("INSERT INTO t VALUES (1)").catch((err: unknown) => err);
        const inTransaction = await database.db.$transaction((tx) => tx.$executeRawUnsafe("INSERT INTO t VALUES (2)")).catch((err: unknown) => err);
        if (mechanism === "chattr") {
          // The connection opened before: its write to the WAL is refused (SQLITE_IOERR_WRITE); one
          // opened after: SQLite opened it read-only (SQLITE_READONLY).
          for (const err of [plain, inTransaction]) {
            expect(err).toBeInstanceOf(Error);
            expect(["SQLITE_IOERR", "SQLITE_READONLY"]).toContain(sqliteCannotWriteCode(err));
            expect(isDatabaseUnavailable(err)).toBe(true);
          }
        }
        undo();
        undone = true;
        // Once the file is writable again, the next write goes through.
        expect(await database.db.$executeRawUnsafe("INSERT INTO t VALUES (4)")).toBe(1);
        expect(await database.checkWritable()).toEqual({ ok: true });
      } finally {
        if (!undone) undo();
        await database.close();
      }
    },
  );
});

(mechanism ? describe : describe.skip)("a connection SQLite opened read-only", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-sqlite-opened-read-only-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is replaced after a transaction it refused, so that writes work once the file is writable again", async () => {
    const file = path.join(dir, "broker.db");
    const setup = await openDatabase(`file:${file}`);
    await setup.db.$executeRawUnsafe("CREATE TABLE t (x INTEGER)");
    await setup.close();
    // A client that opens its connection while the file is unwritable: SQLite opens it read-only.
    const undo = makeUnwritable([file, `${file}-wal`]);
    const db = new SqliteClient({ adapter: new ConfiguredPrismaLibSQL({ url: `file:${file}` }) });
    let undone = false;
    try {
      const refused = await db.$transaction((tx) => tx.$executeRawUnsafe("INSERT INTO t VALUES (1)")).catch((err: unknown) => err);
      expect(sqliteCannotWriteCode(refused)).toBe("SQLITE_READONLY");
      undo();
      undone = true;
      // The transaction that was refused took the read-only connection with it.
      expect(await db.$transaction((tx) => tx.$executeRawUnsafe("INSERT INTO t VALUES (2)"))).toBe(1);
      expect(await db.$executeRawUnsafe("INSERT INTO t VALUES (3)")).toBe(1);
      expect(await db.$queryRawUnsafe<Array<{ n: bigint | number }>>("SELECT count(*) AS n FROM t")).toEqual([{ n: expect.anything() }]);
    } finally {
      if (!undone) undo();
      await db.$disconnect();
    }
  });
});

(unprivilegedAvailable ? describe : describe.skip)("starting on a database this user cannot write", () => {
  let root: string;
  let migrated: string;
  beforeAll(async () => {
    root = mkdtempSync(path.join(tmpdir(), "mab-readonly-"));
    chmodSync(root, 0o755);
    migrated = path.join(root, "migrated.db");
    await copyMigratedSqlite(migrated);
    await (await openDatabase(`file:${migrated}`)).close(); // WAL, as a broker leaves it
  }, 60_000);
  afterAll(() => {
    for (const sub of ["ro-folder", "rw-folder", "rw-folder-2", "cwd"]) if (existsSync(path.join(root, sub))) chmodSync(path.join(root, sub), 0o755);
    rmSync(root, { recursive: true, force: true });
  });

  /** A copy of the migrated database, 0444, in a folder with the given mode. */
  function readOnlyCopy(folderName: string, folderMode: number): string {
    const folder = path.join(root, folderName);
    mkdirSync(folder);
    const file = path.join(folder, "broker.db");
    copyFileSync(migrated, file);
    chmodSync(file, 0o444);
    chmodSync(folder, folderMode);
    return file;
  }

  it("openDatabase refuses with one line naming the file or folder and what to do; Prisma's own write errors are recognised", async () => {
    const inReadOnlyFolder = readOnlyCopy("ro-folder", 0o555);
    const inWritableFolder = readOnlyCopy("rw-folder", 0o777);
    const script = path.join(root, "check.mts");
    writeFileSync(
      script,
      `
      import { openDatabase } from ${JSON.stringify(path.join(projectRoot, "src/store/db.ts"))};
      import { isDatabaseUnavailable, sqliteCannotWriteCode } from ${JSON.stringify(path.join(projectRoot, "src/store/errors.ts"))};
      import { ConfiguredPrismaLibSQL } from ${JSON.stringify(path.join(projectRoot, "src/store/sqlite-connections.ts"))};
      import { PrismaClient } from ${JSON.stringify(path.join(projectRoot, "src/store/generated/sqlite/client.ts"))};
      const out: Record<string, unknown> = {};
      const urls: Record<string, string> = JSON.parse(process.argv[2]!);
      for (const [name, url] of Object.entries(urls)) {
        try { await (await openDatabase(url)).close(); out[name] = "opened"; }
        catch (err) { out[name] = (err as Error).constructor.name + ": " + (err as Error).message; }
      }
      // The same files through a bare client (no start check): what a write raises at run time.
      for (const [name, url] of Object.entries(urls).filter(([n]) => !n.startsWith("new"))) {
        const db = new PrismaClient({ adapter: new ConfiguredPrismaLibSQL({ url }) });
        const err = await db.client.deleteMany({ where: { id: "none" } }).then(() => undefined, (e: unknown) => e);
        out["write " + name] = { name: (err as Error | undefined)?.name, code: sqliteCannotWriteCode(err), unavailable: isDatabaseUnavailable(err) };
        await db.$disconnect();
      }
      process.stdout.write(JSON.stringify(out));
      `,
    );
    const urls = {
      readOnlyFolder: `file:${inReadOnlyFolder}`,
      writableFolder: `file:${inWritableFolder}`,
      newInReadOnlyFolder: `file:${path.join(root, "ro-folder", "new.db")}`,
      newUnderReadOnlyFolder: `file:${path.join(root, "ro-folder", "sub", "new.db")}`,
    };
    const [command, args] = asUnprivileged(tsxBin, [script, JSON.stringify(urls)]);
    const result = await runToEnd(spawn(command, args, { cwd: root, env: cleanEnv({}), stdio: ["ignore", "pipe", "pipe"] }));
    expect(result.stderr.replace(/npm warn.*\n/g, "")).toBe("");
    const out = JSON.parse(result.stdout) as Record<string, unknown>;
    const user = /give user \S+ \(the user running the broker\)/.source;
    expect(out.readOnlyFolder).toMatch(
      new RegExp(
        `^DatabaseNotWritableError: the database file ${inReadOnlyFolder} is read-only for this process: ${user} write access to it and to its folder$`,
      ),
    );
    expect(out.writableFolder).toMatch(
      new RegExp(`^DatabaseNotWritableError: the database file ${inWritableFolder} is read-only for this process: ${user} write access`),
    );
    expect(out.newInReadOnlyFolder).toMatch(
      new RegExp(
        `^DatabaseNotWritableError: the database folder ${path.join(root, "ro-folder")} is not writable for this process \\(SQLite creates new.db-wal and -shm there\\): ${user} write access to it$`,
      ),
    );
    expect(out.newUnderReadOnlyFolder).toMatch(/^DatabaseNotWritableError: cannot create the database folder .*\/ro-folder\/sub \(EACCES\)/);
    // SQLITE_READONLY_DIRECTORY (1544) in a read-only folder, SQLITE_READONLY otherwise: both 503.
    expect(out["write readOnlyFolder"]).toEqual({ name: "DriverAdapterError", code: "SQLITE_READONLY", unavailable: true });
    expect(out["write writableFolder"]).toEqual({ name: "DriverAdapterError", code: "SQLITE_READONLY", unavailable: true });
  }, 30_000);

  it.each([
    ["a writable folder", "rw-folder-2", 0o777, "cwd"],
    // Migrations run first: they name the file too, not "attempt to write a readonly database".
    ["a read-only folder", "ro-folder-2", 0o555, "cwd-2"],
  ])(
    "the broker process prints that one line and exits 1, in %s",
    async (_what, folder, mode, cwdName) => {
      const file = readOnlyCopy(folder, mode);
      const cwd = path.join(root, cwdName);
      mkdirSync(cwd);
      chmodSync(cwd, 0o777);
      const [command, args] = asUnprivileged(process.execPath, [serverEntry]);
      const env = cleanEnv({ DATABASE_URL: `file:${file}`, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "silent" });
      // Its own process group: if it ever started, the broker (a grandchild under runuser) is killed with it.
      const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
      const result = await runToEnd(child, 15_000).finally(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // already gone
        }
      });
      expect(result.code).toBe(1);
      const lines = result.stderr.split("\n").filter((l) => l && !l.startsWith("npm warn"));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        new RegExp(
          `^mcp-auth-broker: failed to start: the database file ${file} is read-only for this process: give user \\S+ \\(the user running the broker\\) write access to it and to its folder$`,
        ),
      );
    },
    30_000,
  );
});

(mechanism ? describe : describe.skip)("/readyz on SQLite", () => {
  let t: TestBroker;
  beforeAll(async () => {
    t = await startBroker();
  });
  afterAll(async () => t?.stop());

  const register = () =>
    fetch(`${t.url}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none" }),
    });

  it("says 200 while the database is writable, 503 with the reason once it is not, and 200 again when fixed", async () => {
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready", database: "writable" });

    const file = path.join(t.dir, "broker.db");
    // Not -shm: SQLite has it mapped in memory, and a store to a mapping of an immutable file
    // kills the process with SIGBUS (seen here).
    const undo = makeUnwritable([file, `${file}-wal`]);
    let undone = false;
    try {
      await expectNotWritable(t.url, "the database file broker.db is read-only for this process");
      const refused = await register();
      if (mechanism === "chattr") {
        // Every write fails now: 503 with Retry-After, not 500.
        expect(refused.status).toBe(503);
        expect(refused.headers.get("retry-after")).toBe("5");
        expect(await refused.json()).toMatchObject({ error: "temporarily_unavailable" });
      } else {
        // chmod does not stop a connection opened before: the write may still succeed; never 500.
        expect([201, 503]).toContain(refused.status);
      }
      undo();
      undone = true;
    } finally {
      if (!undone) undo();
    }
    const again = await fetch(`${t.url}/readyz`);
    expect({ status: again.status, body: await again.text() }).toMatchObject({ status: 200 });
    expect((await register()).status).toBe(201);
  });
});

(postgresAvailable ? describe : describe.skip)("a read-only PostgreSQL database", () => {
  let database: TestPostgresDatabase;
  let t: TestBroker | undefined;
  const base = process.env.MAB_TEST_POSTGRES_URL!;
  const name = () => new URL(database.url).pathname.slice(1);
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: `${base}/postgres` });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  /** Like a replica: sessions that start from now on are read-only; open ones are cut. */
  const setReadOnly = async (on: boolean) => {
    await admin(on ? `ALTER DATABASE ${name()} SET default_transaction_read_only = on` : `ALTER DATABASE ${name()} RESET default_transaction_read_only`);
    await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name()}'`);
  };

  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await t?.stop().catch(() => undefined);
    await database.drop();
  });

  it("is refused at start with one line naming the database, and its write error (25006) is recognised", async () => {
    await setReadOnly(true);
    try {
      const err = await openDatabase(database.url).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DatabaseNotWritableError);
      const target = new URL(database.url);
      expect((err as Error).message).toBe(
        `the PostgreSQL database ${target.hostname}:${target.port}/${name()} is read-only (default_transaction_read_only is on): turn default_transaction_read_only off for this database and role, or point DATABASE_URL at a writable server`,
      );

      const db = new PostgresClient({ adapter: new PrismaPg({ connectionString: database.url }) });
      try {
        const write = await db.$executeRawUnsafe("CREATE TABLE t (x integer)").catch((e: unknown) => e);
        expect(postgresSqlState(write)).toBe("25006");
        expect(isDatabaseUnavailable(write)).toBe(true);
      } finally {
        await db.$disconnect();
      }
    } finally {
      await setReadOnly(false);
    }
  });

  it("makes /readyz say 503 and writes answer 503 with Retry-After", async () => {
    t = await startBroker({ DATABASE_URL: database.url });
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    await setReadOnly(true);
    try {
      await expectNotWritable(t!.url, "PostgreSQL sessions are read-only: default_transaction_read_only is on");
      const refused = await fetch(`${t.url}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none" }),
      });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("5");
    } finally {
      await setReadOnly(false);
    }
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
  }, 60_000);
});

(postgresAvailable ? describe : describe.skip)("a PostgreSQL transaction out of time", () => {
  let database: TestPostgresDatabase;
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => database.drop());

  it("makes a transaction that ran out of its time (P2028) an unavailable database: 503, not 500", async () => {
    const { PrismaPg } = await import("@prisma/adapter-pg");
    const client = new PostgresClient({ adapter: new PrismaPg({ connectionString: database.url }) });
    // Work elsewhere outlasts the transaction's time, as waiting behind a burst of others does.
    const elsewhere = new pg.Client({ connectionString: database.url });
    await elsewhere.connect();
    const err = await client
      .$transaction(
        async (tx) => {
          await elsewhere.query("SELECT pg_sleep(0.5)");
          return tx.grant.count();
        },
        { timeout: 100 },
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await elsewhere.end();
    await client.$disconnect();
    expect((err as { code?: unknown }).code).toBe("P2028");
    expect(isDatabaseUnavailable(err)).toBe(true);
  });
});
