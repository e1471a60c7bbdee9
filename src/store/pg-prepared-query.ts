// The hot store's statements on PostgreSQL as a `pg` Submittable (the interface pg-cursor and
// pg-query-stream are built on): a named statement is parsed once per connection, as pg's own Query
// does, and its result's row description is asked for once per connection too, not on every
// execution. Why: pg's Query sends Describe with each execution and, for each answer, builds a
// parser and a property for every column (`Result.addFields`); with the refresh token's 60-column
// join that was the pg driver's largest cost per refresh in row (g)'s CPU profile. Rows come back
// as arrays of values, decoded with the parsers learnt from that first description. Several
// executions may go in one write with one Sync: one round trip and one transaction for all
// (pg-group-commit.ts).
import type pg from "pg";

type Parser = (value: string) => unknown;

/** The parts of pg's Connection a query drives (pg/lib/connection.js). */
interface Connection {
  readonly parsedStatements: Record<string, string | undefined>;
  readonly submittedNamedStatements: Record<string, string | undefined>;
  readonly stream: { cork?: () => void; uncork?: () => void };
  parse(message: { text: string; name: string; types: readonly number[] }): void;
  bind(message: { portal: string; statement: string; values: ReadonlyArray<string | null> }): void;
  describe(message: { type: "P"; name: string }): void;
  execute(message: { portal: string }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

interface RowDescription {
  readonly fields: ReadonlyArray<{ readonly dataTypeID: number; readonly format?: string }>;
}

/** Per connection: each statement's column parsers, from its first execution's row description. */
const describedOn = new WeakMap<Connection, Map<string, readonly Parser[]>>();

/**
 * A parameter as the text PostgreSQL reads: the hot store passes strings (dates already as ISO
 * text), numbers, booleans and nulls.
 */
function parameterText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  throw new TypeError(`a hot-store parameter must be a string, number, boolean or null, not ${typeof value}`);
}

/** One execution of a named statement: its name, its text (parsed once per connection) and its parameters. */
export interface Execution {
  readonly name: string;
  readonly text: string;
  readonly values: readonly unknown[];
}

/**
 * Executions of named statements sent as one message group ending in a single Sync: PostgreSQL
 * runs them, in order, as one implicit transaction (one commit, one WAL flush), and an error in
 * any one rolls back all of them. A single execution is the usual case.
 */
export class PreparedQuery {
  /** Each execution's rows, in order. */
  readonly results: unknown[][][];
  #connection: Connection | undefined;
  /** Each execution's column parsers: known before it ran, or learnt from its row description. */
  readonly #parsers: Array<readonly Parser[] | undefined>;
  readonly #describing: boolean[];
  /** The execution whose row description serves each one: itself, or an earlier one of the same statement. */
  readonly #describedBy: number[];
  /** The execution whose answer is arriving: one CommandComplete ends each. */
  #current = 0;

  constructor(
    private readonly executions: readonly Execution[],
    private readonly types: pg.CustomTypesConfig,
    private readonly settle: (err: unknown, results?: unknown[][][]) => void,
  ) {
    this.results = executions.map(() => []);
    this.#parsers = executions.map(() => undefined);
    this.#describing = executions.map(() => false);
    this.#describedBy = executions.map((_, i) => i);
  }

  /**
   * Writes the executions (and each statement's parse and description when this connection lacks
   * them) as one corked write. The parameters become text first: a value that cannot fails the
   * query before anything is written, and pg then hands the error back through handleError.
   */
  submit(connection: Connection): Error | null {
    let texts: Array<Array<string | null>>;
    try {
      texts = this.executions.map((e) => e.values.map(parameterText));
    } catch (err) {
      return err as Error;
    }
    this.#connection = connection;
    const described = describedOn.get(connection);
    const describing = new Map<string, number>();
    connection.stream.cork?.();
    try {
      for (const [i, e] of this.executions.entries()) {
        // Marked as submitted here, not by pg (this query has no name of its own): a statement
        // executed twice in one group is parsed once. A failed group closes its connection.
        if (connection.parsedStatements[e.name] === undefined && connection.submittedNamedStatements[e.name] === undefined) {
          connection.parse({ text: e.text, name: e.name, types: [] });
          connection.submittedNamedStatements[e.name] = e.text;
        }
        connection.bind({ portal: "", statement: e.name, values: texts[i]! });
        this.#parsers[i] = described?.get(e.name);
        // Described once per group too: a later execution of the statement reads its rows with the
        // parsers of the first, whose description arrives before them.
        const first = describing.get(e.name);
        if (first !== undefined) this.#describedBy[i] = first;
        else if (this.#parsers[i] === undefined) {
          this.#describing[i] = true;
          describing.set(e.name, i);
          connection.describe({ type: "P", name: "" });
        }
        connection.execute({ portal: "" });
      }
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(message: RowDescription): void {
    this.#parsers[this.#current] = message.fields.map((f) => this.types.getTypeParser(f.dataTypeID, f.format === "binary" ? "binary" : "text") as Parser);
  }

  handleDataRow(message: { readonly fields: ReadonlyArray<string | null> }): void {
    const parsers = this.#parsers[this.#describedBy[this.#current] ?? this.#current] ?? [];
    this.results[this.#current]?.push(message.fields.map((value, i) => (value === null ? null : parsers[i]!(value))));
  }

  handleCommandComplete(): void {
    this.#current++;
  }

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleError(err: unknown): void {
    this.settle(err);
  }

  handleReadyForQuery(): void {
    // Learnt once per connection: a statement without a result row (NoData) has no parsers.
    if (this.#connection && this.#describing.includes(true)) {
      const statements = describedOn.get(this.#connection) ?? new Map<string, readonly Parser[]>();
      for (const [i, e] of this.executions.entries()) if (this.#describing[i]) statements.set(e.name, this.#parsers[i] ?? []);
      describedOn.set(this.#connection, statements);
    }
    this.settle(null, this.results);
  }

  handleCopyInResponse(connection: Connection): void {
    connection.sendCopyFail("the hot store sends no COPY data");
  }

  handleCopyData(): void {}
}

/**
 * Runs `executions` on one connection of `pool`, as one implicit transaction; each one's rows as
 * arrays of parsed values. The connection is checked out as pool.query does it: a listener takes
 * its errors meanwhile (the server ending the session, the socket closing), and it goes back to
 * the pool in the same turn as its answer, where the pool's own listener takes over. Released
 * later (after an await), an error read in the same chunk as the answer would find no listener
 * and end the process.
 */
export function preparedExecutions(pool: pg.Pool, types: pg.CustomTypesConfig, executions: readonly Execution[]): Promise<unknown[][][]> {
  return new Promise<unknown[][][]>((resolve, reject) => {
    pool.connect((connectError, client, release) => {
      if (connectError || !client) return reject(connectError ?? new Error("the PostgreSQL pool gave no connection"));
      let settled = false;
      const settle = (err: unknown, results?: unknown[][][]) => {
        if (settled) return;
        settled = true;
        client.removeListener("error", settle);
        // As pool.query does: a connection whose statement failed is closed, not reused.
        release(err === null || err === undefined ? undefined : err instanceof Error ? err : true);
        if (err === null || err === undefined) resolve(results ?? []);
        else reject(err);
      };
      client.on("error", settle);
      client.query(new PreparedQuery(executions, types, settle) as unknown as pg.Submittable);
    });
  });
}

/** Runs one named statement on a connection of `pool`: its rows as arrays of parsed values. */
export async function preparedRows(pool: pg.Pool, types: pg.CustomTypesConfig, name: string, text: string, values: readonly unknown[]): Promise<unknown[][]> {
  return (await preparedExecutions(pool, types, [{ name, text, values }]))[0] ?? [];
}
