// The libsql driver adapter with our SQLite settings on every connection it uses.
//
// Why: @libsql/client's local client hands its open connection to each interactive transaction
// and lazily opens a new one for the next call (sqlite3.js `transaction()` / `#getDb()`). Settings
// made with a plain `PRAGMA` query therefore stay behind on the first connection: after the first
// `$transaction`, `busy_timeout` read 0 and a write lock held for a moment by another process (the
// CLI) failed at once instead of waiting. WAL is a property of the file and survives; the settings
// below belong to one connection and must be set on each.
import type { Client, Config, InStatement, ResultSet, Transaction, TransactionMode } from "@libsql/client";
import { PrismaLibSQL } from "@prisma/adapter-libsql";
import { openedReadOnly } from "./sqlite-hot-sql.ts";
import { SQLITE_CONNECTION_PRAGMAS } from "./sqlite-pragmas.ts";
import { sqliteWriteGate, type SqliteWriteGate } from "./sqlite-write-gate.ts";

export { SQLITE_BUSY_TIMEOUT_MS, SQLITE_CONNECTION_PRAGMAS } from "./sqlite-pragmas.ts";

/**
 * Forwards to the libsql client and runs the pragmas before the first statement on each new
 * connection: at the start and after every `transaction()`, which takes the current connection
 * away. The pragmas go to the connection that `transaction()` then takes, so they also hold inside
 * transactions. No interleaving to fear: the Prisma adapter serialises every call on its client
 * (one mutex, held by an open transaction until it ends).
 */
class ConfiguredConnections implements Client {
  #fresh = true;

  constructor(
    private readonly inner: Client,
    private readonly gate: SqliteWriteGate,
  ) {}

  async #configure(): Promise<void> {
    if (!this.#fresh) return;
    // On the connection the next statement uses (opening it if needed). If this fails (e.g. the
    // file cannot be opened), #fresh stays set and the next call tries again.
    await this.inner.execute(SQLITE_CONNECTION_PRAGMAS.withRow);
    await this.inner.executeMultiple(SQLITE_CONNECTION_PRAGMAS.rowless);
    this.#fresh = false;
  }

  /**
   * Statements outside a transaction also wait for the write gate: otherwise one that writes
   * while the hot store's writer thread commits would wait for its lock in SQLite's busy handler,
   * blocking the event loop. (Reads wait too: the driver cannot tell them apart; a cold path's read
   * waits at most one group commit.)
   */
  async #gated<T>(work: () => Promise<T>): Promise<T> {
    const release = await this.gate.acquire();
    try {
      return await work();
    } finally {
      release();
    }
  }

  execute(stmt: InStatement): Promise<ResultSet> {
    return this.#gated(async () => {
      await this.#configure();
      try {
        return await this.inner.execute(stmt);
      } catch (err) {
        if (!openedReadOnly(err)) throw err;
        // SQLite opens a connection read-only when the file cannot be written at that moment, and
        // it stays so. The file may be writable again (permissions fixed): retry once on a new
        // connection. Safe: a statement refused as read-only changed nothing.
        await this.#replaceConnection();
        await this.#configure();
        return this.inner.execute(stmt);
      }
    });
  }

  /** The client keeps no handle to drop its connection; handing it to a transaction does. */
  async #replaceConnection(): Promise<void> {
    const tx = await this.inner.transaction("deferred");
    this.#fresh = true;
    tx.close();
  }

  batch(stmts: Array<InStatement>, mode?: TransactionMode): Promise<Array<ResultSet>> {
    return this.#gated(async () => {
      await this.#configure();
      return this.inner.batch(stmts, mode);
    });
  }

  /**
   * Every transaction takes the write lock at BEGIN (IMMEDIATE, whatever Prisma asks for): a
   * deferred one that reads first and writes later fails at once with SQLITE_BUSY when another
   * connection wrote in between — busy_timeout cannot help there. It also holds this process's
   * write gate until it ends (sqlite-write-gate.ts says why).
   */
  async transaction(_mode?: TransactionMode): Promise<Transaction> {
    await this.#configure();
    const release = await this.gate.acquire();
    try {
      return gated(await this.inner.transaction("write"), release);
    } catch (err) {
      release();
      throw err;
    } finally {
      // The client now opens a new connection on its next use.
      this.#fresh = true;
    }
  }

  executeMultiple(sql: string): Promise<void> {
    return this.#gated(async () => {
      await this.#configure();
      return this.inner.executeMultiple(sql);
    });
  }

  sync(): Promise<void> {
    return this.inner.sync();
  }

  close(): void {
    this.inner.close();
  }

  get closed(): boolean {
    return this.inner.closed;
  }

  get protocol(): string {
    return this.inner.protocol;
  }
}

/** The transaction, releasing the write gate when it ends (commit, rollback or close). */
function gated(tx: Transaction, release: () => void): Transaction {
  return {
    execute: (stmt) => tx.execute(stmt),
    batch: (stmts) => tx.batch(stmts),
    executeMultiple: (sql) => tx.executeMultiple(sql),
    commit: () => tx.commit().finally(release),
    rollback: () => tx.rollback().finally(release),
    close: () => {
      try {
        tx.close();
      } finally {
        release();
      }
    },
    get closed() {
      return tx.closed;
    },
  };
}

/** PrismaLibSQL whose client applies SQLITE_CONNECTION_PRAGMAS to every connection. */
export class ConfiguredPrismaLibSQL extends PrismaLibSQL {
  override createClient(config: Config): Client {
    return new ConfiguredConnections(super.createClient(config), sqliteWriteGate(config.url.replace(/^file:/, "")));
  }
}
