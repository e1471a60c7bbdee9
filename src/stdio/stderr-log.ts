// A stdio MCP server's stderr goes to the broker log, line by line, bounded: a chatty or looping
// child must not flood the log or the disk. Each line is cut at MAX_LINE characters; beyond
// LINES_PER_WINDOW lines in a window the rest are dropped, which is said once when it starts and
// counted when the next window opens.
import type { Logger } from "../logger.ts";

const MAX_LINE = 1000;
export const STDERR_LINES_PER_WINDOW = 50;
const WINDOW_MS = 10_000;

export function stderrLogger(log: Logger, now: () => number = Date.now): (chunk: Buffer) => void {
  let partial = "";
  let windowStart = now();
  let lines = 0;
  let dropped = 0;
  const emit = (line: string) => {
    const t = now();
    if (t - windowStart >= WINDOW_MS) {
      if (dropped > 0) log.warn({ dropped }, "stdio MCP server stderr: lines were dropped (rate limit)");
      windowStart = t;
      lines = 0;
      dropped = 0;
    }
    if (++lines > STDERR_LINES_PER_WINDOW) {
      if (dropped++ === 0) log.warn(`stdio MCP server stderr: over ${STDERR_LINES_PER_WINDOW} lines in ${WINDOW_MS / 1000} s; dropping the rest for now`);
      return;
    }
    log.info({ stderr: line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line }, "stdio MCP server");
  };
  return (chunk) => {
    const text = partial + chunk.toString("utf8");
    const parts = text.split("\n");
    partial = parts.pop() ?? "";
    // A line without end still counts once it is long.
    if (partial.length > MAX_LINE) {
      parts.push(partial);
      partial = "";
    }
    for (const line of parts) if (line.trim()) emit(line.replace(/\r$/, ""));
  };
}
