// One writer at a time per SQLite file within this process, across the event loop.
//
// Why: the hot store writes synchronously (BEGIN IMMEDIATE … COMMIT within one call), while a Prisma
// interactive transaction holds the file's write lock across several event-loop turns. Had the hot
// store started its transaction meanwhile, SQLite's busy handler would have waited synchronously —
// blocking the very event loop the Prisma transaction needs to finish — and failed after
// busy_timeout. So Prisma transactions hold this gate from BEGIN to COMMIT/ROLLBACK, and the hot
// store's writer runs only when the gate is free. Other processes (the CLI) are SQLite's business:
// busy_timeout makes each side wait for the other.

export class SqliteWriteGate {
  #held = false;
  readonly #waiting: Array<() => void> = [];

  get held(): boolean {
    return this.#held;
  }

  /** Resolves with the release function once this caller holds the gate (first come, first served). */
  acquire(): Promise<() => void> {
    return new Promise((resolve) => {
      const grant = () => {
        this.#held = true;
        let released = false;
        resolve(() => {
          if (released) return;
          released = true;
          this.#held = false;
          this.#waiting.shift()?.();
        });
      };
      if (this.#held) this.#waiting.push(grant);
      else grant();
    });
  }

  /** Runs `work` synchronously now if the gate is free, else as soon as it is (holding it meanwhile). */
  runWhenFree(work: () => void): void {
    if (!this.#held) {
      work();
      return;
    }
    void this.acquire().then((release) => {
      try {
        work();
      } finally {
        release();
      }
    });
  }
}

const gates = new Map<string, SqliteWriteGate>();

/** The gate of one database file (an absolute path), shared by every connection of this process. */
export function sqliteWriteGate(file: string): SqliteWriteGate {
  let gate = gates.get(file);
  if (!gate) {
    gate = new SqliteWriteGate();
    gates.set(file, gate);
  }
  return gate;
}
