// The hot store's writer thread on SQLite: what would make the event-loop thread wait happens
// here (sqlite-writer.ts). It commits the groups that found the write lock taken by another
// process, waiting for it (busy_timeout) and answering after COMMIT (synchronous=FULL), and it runs
// the WAL checkpoints the event loop's connection leaves undone.
import { parentPort, workerData } from "node:worker_threads";
import { commitGroup } from "./sqlite-group-commit.ts";
import { HotConnection, readSettings } from "./sqlite-hot-sql.ts";
import type { WriterReply, WriterRequest, WriterThreadData } from "./sqlite-writer-protocol.ts";

const port = parentPort;
if (!port) throw new Error("sqlite-writer-thread runs as a worker thread only");
const { file } = workerData as WriterThreadData;
const connection = new HotConnection(file);

/**
 * Copies the WAL's committed pages into the database so the WAL can start over. PASSIVE: it waits
 * for no one and blocks no one (pages a reader still needs stay for the next time).
 */
function checkpoint(): { walPages: number; error?: string } {
  try {
    // [busy, pages in the WAL, pages checkpointed]
    const [, walPages] = connection.db().prepare("PRAGMA wal_checkpoint(PASSIVE)").raw(true).get() as [number, number, number];
    return { walPages };
  } catch (err) {
    connection.dropIfReadOnly(err);
    return { walPages: 0, error: err instanceof Error ? err.message : String(err) };
  }
}

port.on("message", (request: WriterRequest) => {
  let reply: WriterReply;
  switch (request.type) {
    case "group":
      reply = { type: "group", id: request.id, outcomes: commitGroup(connection, request.writes) };
      break;
    case "checkpoint":
      reply = { type: "checkpoint", id: request.id, ...checkpoint() };
      break;
    case "settings":
      reply = { type: "settings", id: request.id, settings: readSettings(connection.db()) };
      break;
    case "close":
      connection.close();
      reply = { type: "closed", id: request.id };
      break;
  }
  port.postMessage(reply);
  if (request.type === "close") port.close();
});
