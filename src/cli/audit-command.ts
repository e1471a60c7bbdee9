// `audit`: the security events the broker recorded (logins, refusals, consents, revocations, token
// replays…), filtered, newest last. Never shows a token, code or secret: none is recorded.
import type { Command } from "commander";
import { withContext } from "./context.ts";
import { CliError, iso, jsonCommand, printJson, printTable } from "./output.ts";
import type { CliIo } from "./io.ts";

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

/** `30m`, `1h`, `7d`, `2w` ago, or an ISO 8601 date/time. */
export function parseSince(value: string, now: Date): Date {
  const relative = /^(\d+)([smhdw])$/.exec(value.trim());
  if (relative) return new Date(now.getTime() - Number(relative[1]) * UNITS[relative[2]!]! * 1000);
  if (/^\d{4}-\d{2}-\d{2}/.test(value)) {
    const date = new Date(value);
    if (!Number.isNaN(date.getTime())) return date;
  }
  throw new CliError(`--since ${JSON.stringify(value)}: give a duration (30m, 1h, 7d, 2w) or an ISO date (2026-11-23 or 2026-11-23T10:00:00Z)`, 2);
}

function parseLimit(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new CliError(`--limit ${JSON.stringify(value)}: give a whole number from 1 to 100000`, 2);
  return n;
}

export function registerAuditCommand(program: Command, io: CliIo): void {
  jsonCommand(program, "audit", "show the audit trail: sign-ins, refusals, consents, revocations, token replays (newest last)")
    .option("--since <when>", "from this long ago (30m, 1h, 7d, 2w) or this date (ISO 8601)", "24h")
    .option("--user <subject>", "only events of this user, e.g. github:583231")
    .option("--client <id>", "only events of this client")
    .option("--type <type>", "only this event type (login.refused) or family (login)")
    .option("--limit <n>", "at most the newest n events", "1000")
    .action(async (opts: { since: string; user?: string; client?: string; type?: string; limit: string; json?: boolean }) => {
      const filter = {
        since: parseSince(opts.since, new Date()),
        subject: opts.user,
        clientId: opts.client,
        type: opts.type,
        limit: parseLimit(opts.limit),
      };
      await withContext(io, async ({ services }) => {
        const events = await services.auditLog.read(filter);
        if (opts.json)
          return printJson(
            io,
            events.map((e) => ({ ...e, at: e.at.toISOString() })),
          );
        printTable(
          io,
          events.map((e) => ({
            at: iso(e.at),
            type: e.type,
            user: e.subject ?? "-",
            client: e.clientId ?? "-",
            ip: e.ip ?? "-",
            detail: Object.keys(e.detail).length ? JSON.stringify(e.detail) : "",
          })),
          `No audit events since ${iso(filter.since)}${opts.user || opts.client || opts.type ? " matching the filter" : ""}.`,
        );
      });
    });
}
