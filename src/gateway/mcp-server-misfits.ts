// At run time, the MCP server's answers that no working setup produces (it asks for its own
// authorization, the URL is not an MCP endpoint): one warning per cause, saying what it means and
// what to change, then at most one per cause every ten minutes with how many were not logged. The
// client only sees a failed request; without this the operator would see `status 401` in an info
// line and nothing else (outbound/mcp-server-answer.ts reads the answer, as `check` does).
import type { Logger } from "../logger.ts";
import { misfitOf, type McpServerAnswer, type Misfit } from "../outbound/mcp-server-answer.ts";

const EVERY_MS = 10 * 60 * 1000;

export interface MisfitWarningsOptions {
  readonly logger: Logger;
  /** MCP_SERVER_URL, named in the warning. */
  readonly targetUrl: string;
  /** Minimum time between two warnings of one cause (default 10 minutes). */
  readonly everyMs?: number;
  readonly now?: () => number;
}

/** Returns the proxy's `answered` hook. */
export function misfitWarnings(options: MisfitWarningsOptions): (answer: McpServerAnswer) => void {
  const every = options.everyMs ?? EVERY_MS;
  const now = options.now ?? Date.now;
  const last = new Map<Misfit["kind"], { at: number; unlogged: number }>();
  return (answer) => {
    // The hot path: an MCP answer is looked at only when its status could be a misfit.
    if (answer.status < 300 && !answer.contentType?.startsWith("text/html")) return;
    const misfit = misfitOf(answer);
    if (!misfit) return;
    const seen = last.get(misfit.kind);
    const at = now();
    if (seen && at - seen.at < every) {
      seen.unlogged++;
      return;
    }
    last.set(misfit.kind, { at, unlogged: 0 });
    options.logger.warn(
      { status: answer.status, cause: misfit.kind, ...(seen?.unlogged ? { notLoggedSince: seen.unlogged } : {}) },
      `the MCP server ${options.targetUrl} answered ${misfit.meaning}`,
    );
  };
}
