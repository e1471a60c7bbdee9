// The messages between the event-loop thread (sqlite-writer.ts) and the SQLite writer thread
// (sqlite-writer-thread.ts).
import type { WriteOutcome } from "./sqlite-group-commit.ts";
import type { HotWriteRequest } from "./sqlite-hot-writes.ts";
import type { SqliteConnectionSettings } from "./sqlite-hot-sql.ts";

export interface WriterThreadData {
  /** The database file (an absolute path). */
  readonly file: string;
}

export type WriterRequest =
  | { readonly type: "group"; readonly id: number; readonly writes: readonly HotWriteRequest[] }
  | { readonly type: "settings"; readonly id: number }
  | { readonly type: "checkpoint"; readonly id: number }
  | { readonly type: "close"; readonly id: number };

export type WriterReply =
  | { readonly type: "group"; readonly id: number; readonly outcomes: readonly WriteOutcome[] }
  | { readonly type: "settings"; readonly id: number; readonly settings: SqliteConnectionSettings }
  /** `walPages`: the pages the WAL held when the checkpoint ran. */
  | { readonly type: "checkpoint"; readonly id: number; readonly walPages: number; readonly error?: string }
  | { readonly type: "closed"; readonly id: number };
