// The libsql driver adapter with our SQLite settings on every connection it uses, and its
// transactions on that same connection.
//
// Why: @libsql/client's local client hands its open connection to each interactive transaction
// and lazily opens a new one for the next call (sqlite3.js `transaction()` / `#getDb()`), and its
// transaction never closes the connection it took: each Prisma `$transaction` left a connection
// (two file descriptors) for the garbage collector, 1,000 descriptors after 500 transactions and
// 600 still after a full collection (measured), and paid for opening and configuring a new one.
// Here a transaction runs on the client's own connection instead: BEGIN, its statements, COMMIT.
// Safe because the Prisma adapter holds its client's mutex from the start of a transaction to its
// end, so nothing else runs on the connection meanwhile. Settings made with a plain `PRAGMA` query
// belong to one connection: they are set on each new one (at the start, and after a connection
// opened read-only is replaced).
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
   * while the hot store's writer thread commits a group would wait for its lock in SQLite's busy handler,
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
    const release = await this.gate.acquire();
    try {
      await this.#configure();
      await this.inner.execute("BEGIN IMMEDIATE");
    } catch (err) {
      release();
      throw err;
    }
    return new SharedConnectionTransaction(this.inner, () => this.#replaceConnection(), release);
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

/** What @libsql/client's LibsqlError carries (a code), without a runtime import of a package the broker does not depend on. */
class TransactionError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * A transaction on the client's own connection (see the top of this file): its statements go to
 * the connection directly (the transaction holds the write gate already). A statement refused
 * because the connection was opened read-only marks it for replacement once the transaction has
 * ended, so that the next one (a retried write, the /readyz probe) gets a new connection, which
 * sees whether the file is writable now. A failed COMMIT is rolled back here, and the connection
 * replaced: it is shared, and a transaction left open would take in every statement after it.
 */
class SharedConnectionTransaction implements Transaction {
  #open = true;
  /** The connection is to be replaced once the transaction has ended. */
  #replace = false;

  constructor(
    private readonly connection: Client,
    private readonly replaceConnection: () => Promise<void>,
    private readonly release: () => void,
  ) {}

  async execute(stmt: InStatement): Promise<ResultSet> {
    if (!this.#open) throw new TransactionError("The transaction is closed", "TRANSACTION_CLOSED");
    try {
      return await this.connection.execute(stmt);
    } catch (err) {
      if (openedReadOnly(err)) this.#replace = true;
      throw err;
    }
  }

  async batch(stmts: Array<InStatement>): Promise<Array<ResultSet>> {
    const results: ResultSet[] = [];
    for (const stmt of stmts) results.push(await this.execute(stmt));
    return results;
  }

  // Prisma runs scripts (migrations) outside transactions; the client's executeMultiple would roll
  // back whatever transaction is open when it ends.
  executeMultiple(_sql: string): Promise<void> {
    return Promise.reject(new TransactionError("A script cannot run inside a transaction here.", "NOT_SUPPORTED"));
  }

  async commit(): Promise<void> {
    await this.#end("COMMIT");
  }

  async rollback(): Promise<void> {
    await this.#end("ROLLBACK");
  }

  close(): void {
    if (this.#open) void this.#end("ROLLBACK").catch(() => undefined);
  }

  get closed(): boolean {
    return !this.#open;
  }

  async #end(statement: "COMMIT" | "ROLLBACK"): Promise<void> {
    if (!this.#open) throw new TransactionError("The transaction is closed", "TRANSACTION_CLOSED");
    this.#open = false;
    try {
      await this.connection.execute(statement);
    } catch (err) {
      // SQLite may have rolled back already (an I/O error, a full disk): then there is nothing to end.
      await this.connection.execute("ROLLBACK").catch(() => undefined);
      // libsql leaves the failed statement active, and with it a read transaction on the
      // connection: SQLite then answers a later BEGIN IMMEDIATE that meets another process's lock
      // with SQLITE_BUSY at once, without waiting (measured: a COMMIT refused by a deferred
      // foreign key). A new connection has none.
      this.#replace = true;
      throw err;
    } finally {
      try {
        if (this.#replace) await this.replaceConnection();
      } finally {
        this.release();
      }
    }
  }
}

/** PrismaLibSQL whose client applies SQLITE_CONNECTION_PRAGMAS to every connection. */
export class ConfiguredPrismaLibSQL extends PrismaLibSQL {
  override createClient(config: Config): Client {
    return new ConfiguredConnections(super.createClient(config), sqliteWriteGate(config.url.replace(/^file:/, "")));
  }
}
