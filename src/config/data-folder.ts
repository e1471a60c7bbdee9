// The data folder demo mode keeps its generated key and SQLite database in, and the words for
// when this process cannot write there: which folder, as whom, and what to do.
import { accessSync, constants, existsSync } from "node:fs";
import { userInfo } from "node:os";
import path from "node:path";

/** Demo mode cannot write its data folder; the message says which and what to do. */
export class DataFolderError extends Error {}

/** The user the broker runs as, for messages. */
function runningAs(): string {
  try {
    return `user ${userInfo().username}`;
  } catch {
    return `uid ${process.getuid?.() ?? "?"}`;
  }
}

/**
 * Why files cannot be created in `dir` by this process: the error code of the folder, or of the
 * nearest one above it that exists (where it would be made); undefined when they can.
 */
export function folderWriteFailure(dir: string): string | undefined {
  let existing = dir;
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  try {
    accessSync(existing, constants.W_OK);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? "EACCES";
  }
}

/**
 * Why demo mode cannot keep its files (generated key, SQLite database) in `dataDir`, said like the
 * read-only database: which folder, and what to do. Undefined when it can (the folder, or the
 * nearest one above it that exists, is writable).
 */
export function dataFolderProblem(dataDir: string, err?: NodeJS.ErrnoException): string | undefined {
  const code = err ? (err.code ?? err.message) : folderWriteFailure(dataDir);
  if (code === undefined) return undefined;
  return `cannot create or write the data folder ${dataDir} (${code}), where demo mode keeps its generated key and its database: start the broker in a folder ${runningAs()} can write, or create ${dataDir} writable for that user`;
}
