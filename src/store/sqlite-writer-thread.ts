// The hot store's writer thread on SQLite: it owns the connection that writes, and commits each
// group of writes the event-loop thread sends (sqlite-writer.ts), answering after COMMIT. Waits
// for another process's lock (busy_timeout), the fsync at COMMIT and WAL checkpoints happen here,
// never on the thread that serves requests.
import { parentPort, workerData } from "node:worker_threads";
import { commitGroup } from "./sqlite-group-commit.ts";
import { HotConnection, readSettings } from "./sqlite-hot-sql.ts";
import type { WriterReply, WriterRequest, WriterThreadData } from "./sqlite-writer-protocol.ts";

const port = parentPort;
if (!port) throw new Error("sqlite-writer-thread runs as a worker thread only");
const { file } = workerData as WriterThreadData;
const connection = new HotConnection(file);

port.on("message", (request: WriterRequest) => {
  let reply: WriterReply;
  switch (request.type) {
    case "group":
      reply = { type: "group", id: request.id, outcomes: commitGroup(connection, request.writes) };
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
