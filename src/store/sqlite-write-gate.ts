// One writer at a time per SQLite file within this process, across Prisma's connections and the
// hot store's (on the event loop and on its writer thread).
//
// Why: a Prisma interactive transaction holds the file's write lock across several event-loop
// turns, and the hot store holds it while it commits a group. Had either started while the other
// held the lock, SQLite's busy handler would have waited synchronously: on the event-loop thread
// (Prisma's connections are synchronous underneath) that blocks every request, and a busy handler
// notices a released lock only at its next poll (up to 100 ms later); the hot store's event-loop
// connection would have been refused at once. So Prisma transactions hold this gate from BEGIN to
// COMMIT/ROLLBACK, and the hot store holds it while it commits a group (from sending it to the
// writer thread until the answer, when it goes there). Other processes (the CLI) are SQLite's business:
// busy_timeout makes each side wait for the other (on the writer thread, without blocking the
// event loop).

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
