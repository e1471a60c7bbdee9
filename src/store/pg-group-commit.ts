// Group commit on PostgreSQL. The refresh rotations and code exchanges asked for in one event-loop
// turn go to the server as one message group ending in one Sync (pg-prepared-query.ts): one round
// trip, one implicit transaction, one commit and one WAL flush for all of them, where each had its
// own (bench row (g): the flush of each commit cost PostgreSQL about as much CPU as everything else
// in a refresh that the broker's own group commit on SQLite already shares). Each write still
// answers only after that commit: an answer sent is an answer stored. The reads that precede them
// (a refresh token or a code by its hash) are sent the same way, in groups of their own: one write
// to the socket and one wake-up of the server for the turn's reads, where each cost both.
import pg from "pg";
import type { Execution } from "./pg-prepared-query.ts";

/** An execution of a group, with the key that orders the row locks it takes (see below; a read takes none). */
export interface GroupedExecution extends Execution {
  readonly lockKey: string;
}

/** Runs executions as one implicit transaction: each one's rows, in order (pg-prepared-query.ts). */
export type RunExecutions = (executions: readonly Execution[]) => Promise<unknown[][][]>;

interface Pending {
  readonly execution: GroupedExecution;
  readonly resolve: (rows: unknown[][]) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * The most executions in one group: a bound on the message a group sends and on the work one
 * failure sends back to one transaction per execution.
 */
export const MAX_GROUP = 64;

/**
 * An error PostgreSQL answered for a statement: the group's transaction was rolled back, so each
 * write can be retried alone. Any other failure (the connection lost before the answer) leaves
 * the commit unknown: those writes fail, as a single one would, rather than run twice.
 */
const rolledBack = (err: unknown): boolean => err instanceof pg.DatabaseError;

/** Queues executions and sends those of one event-loop turn together: each answers with its rows. */
export function pgGroupCommit(run: RunExecutions): (execution: GroupedExecution) => Promise<unknown[][]> {
  let pending: Pending[] = [];

  const commitAlone = ({ execution, resolve, reject }: Pending) => run([execution]).then(([rows]) => resolve(rows ?? []), reject);

  const commit = async (group: Pending[]): Promise<void> => {
    try {
      const results = await run(group.map((p) => p.execution));
      for (const [i, p] of group.entries()) p.resolve(results[i] ?? []);
    } catch (err) {
      // An execution that fails (a broken row, a deadlock PostgreSQL broke) fails alone.
      if (group.length > 1 && rolledBack(err)) await Promise.all(group.map(commitAlone));
      else for (const p of group) p.reject(err);
    }
  };

  const flush = () => {
    // Row locks in one order in every group (a grant's token, then the grant): two groups that
    // rotate tokens of the same two grants cannot each wait for the other's lock.
    const queued = pending.sort((a, b) => (a.execution.lockKey < b.execution.lockKey ? -1 : a.execution.lockKey > b.execution.lockKey ? 1 : 0));
    pending = [];
    for (let i = 0; i < queued.length; i += MAX_GROUP) void commit(queued.slice(i, i + MAX_GROUP));
  };

  return (execution) =>
    new Promise<unknown[][]>((resolve, reject) => {
      if (pending.length === 0) setImmediate(flush);
      pending.push({ execution, resolve, reject });
    });
}
