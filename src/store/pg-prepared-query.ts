// The hot store's statements on PostgreSQL as a `pg` Submittable (the interface pg-cursor and
// pg-query-stream are built on): a named statement is parsed once per connection, as pg's own Query
// does, and its result's row description is asked for once per connection too, not on every
// execution. Why: pg's Query sends Describe with each execution and, for each answer, builds a
// parser and a property for every column (`Result.addFields`); with the refresh token's 60-column
// join that was the pg driver's largest cost per refresh in row (g)'s CPU profile. Rows come back
// as arrays of values, decoded with the parsers learnt from that first description.
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

export class PreparedQuery {
  readonly rows: unknown[][] = [];
  #connection: Connection | undefined;
  /** The column parsers: known before the execution, or learnt from its row description. */
  #parsers: readonly Parser[] | undefined;
  #describing = false;

  constructor(
    readonly name: string,
    readonly text: string,
    private readonly values: readonly unknown[],
    private readonly types: pg.CustomTypesConfig,
    private readonly settle: (err: unknown, rows?: unknown[][]) => void,
  ) {}

  /**
   * Writes the execution (and the statement's parse and description when this connection lacks
   * them) as one corked write. The parameters become text first: a value that cannot fails the
   * query before anything is written, and pg then hands the error back through handleError.
   */
  submit(connection: Connection): Error | null {
    let texts: Array<string | null>;
    try {
      texts = this.values.map(parameterText);
    } catch (err) {
      return err as Error;
    }
    this.#connection = connection;
    this.#parsers = describedOn.get(connection)?.get(this.name);
    this.#describing = this.#parsers === undefined;
    connection.stream.cork?.();
    try {
      if (connection.parsedStatements[this.name] === undefined && connection.submittedNamedStatements[this.name] === undefined) {
        connection.parse({ text: this.text, name: this.name, types: [] });
        connection.submittedNamedStatements[this.name] = this.text;
      }
      connection.bind({ portal: "", statement: this.name, values: texts });
      if (this.#describing) connection.describe({ type: "P", name: "" });
      connection.execute({ portal: "" });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(message: RowDescription): void {
    this.#parsers = message.fields.map((f) => this.types.getTypeParser(f.dataTypeID, f.format === "binary" ? "binary" : "text") as Parser);
  }

  handleDataRow(message: { readonly fields: ReadonlyArray<string | null> }): void {
    const parsers = this.#parsers ?? [];
    this.rows.push(message.fields.map((value, i) => (value === null ? null : parsers[i]!(value))));
  }

  handleCommandComplete(): void {}

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleError(err: unknown): void {
    this.settle(err);
  }

  handleReadyForQuery(): void {
    // Learnt once per connection: a statement without a result row (NoData) has no parsers.
    if (this.#describing && this.#connection) {
      const statements = describedOn.get(this.#connection) ?? new Map<string, readonly Parser[]>();
      statements.set(this.name, this.#parsers ?? []);
      describedOn.set(this.#connection, statements);
    }
    this.settle(null, this.rows);
  }

  handleCopyInResponse(connection: Connection): void {
    connection.sendCopyFail("the hot store sends no COPY data");
  }

  handleCopyData(): void {}
}

/**
 * Runs the named statement on a connection of `pool`; its rows as arrays of parsed values. The
 * connection is checked out as pool.query does it: a listener takes its errors meanwhile (the
 * server ending the session, the socket closing), and it goes back to the pool in the same turn
 * as its answer, where the pool's own listener takes over. Released later (after an await), an
 * error read in the same chunk as the answer would find no listener and end the process.
 */
export function preparedRows(pool: pg.Pool, types: pg.CustomTypesConfig, name: string, text: string, values: readonly unknown[]): Promise<unknown[][]> {
  return new Promise<unknown[][]>((resolve, reject) => {
    pool.connect((connectError, client, release) => {
      if (connectError || !client) return reject(connectError ?? new Error("the PostgreSQL pool gave no connection"));
      let settled = false;
      const settle = (err: unknown, rows?: unknown[][]) => {
        if (settled) return;
        settled = true;
        client.removeListener("error", settle);
        // As pool.query does: a connection whose statement failed is closed, not reused.
        release(err === null || err === undefined ? undefined : err instanceof Error ? err : true);
        if (err === null || err === undefined) resolve(rows ?? []);
        else reject(err);
      };
      client.on("error", settle);
      client.query(new PreparedQuery(name, text, values, types, settle) as unknown as pg.Submittable);
    });
  });
}
