// `audit`: the security events the broker recorded (logins, refusals, consents, revocations, token
// replays…), filtered, newest last. Never shows a token, code or secret: none is recorded.
import { serverNamed, serverOption } from "./server-option.ts";
import type { Command } from "commander";
import { withContext } from "./context.ts";
import { CliError, iso, jsonCommand, printJson, printTable } from "./output.ts";
import type { CliIo } from "./io.ts";
import { followAuditLog, type FollowOptions } from "./audit-follow.ts";
import { auditJson, type AuditRecord } from "../grants/audit-log.ts";

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

function parseInterval(value: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds < 0.01 || seconds > 3600)
    throw new CliError(`--interval ${JSON.stringify(value)}: give seconds from 0.01 to 3600`, 2);
  return seconds * 1000;
}

/** The columns of a followed trail: fixed widths, since rows arrive one by one. */
const FOLLOW_COLUMNS = [
  ["AT", 24],
  ["TYPE", 22],
  ["USER", 20],
  ["CLIENT", 36],
  ["IP", 15],
  ["DETAIL", 0],
] as const;

function followRow(cells: readonly string[]): string {
  return `${cells
    .map((cell, i) => cell.padEnd(FOLLOW_COLUMNS[i]![1]))
    .join("  ")
    .trimEnd()}\n`;
}

function rowCells(e: AuditRecord): string[] {
  return [iso(e.at), e.type, e.subject ?? "-", e.clientId ?? "-", e.ip ?? "-", Object.keys(e.detail).length ? JSON.stringify(e.detail) : ""];
}

/** Ctrl-C ends a followed trail (tests stop it through their I/O). */
function interruption(io: CliIo): { signal: AbortSignal; release(): void } {
  if (io.stop) return { signal: io.stop, release: () => undefined };
  const controller = new AbortController();
  const onInterrupt = () => controller.abort();
  process.once("SIGINT", onInterrupt);
  return { signal: controller.signal, release: () => void process.off("SIGINT", onInterrupt) };
}

function parseLimit(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new CliError(`--limit ${JSON.stringify(value)}: give a whole number from 1 to 100000`, 2);
  return n;
}

interface AuditOptions {
  since: string;
  user?: string;
  client?: string;
  type?: string;
  limit: string;
  json?: boolean;
  follow?: boolean;
  interval: string;
  server?: string;
}

/** The events already read, then every new one as it is recorded, until `stop` fires. */
async function followTrail(
  io: CliIo,
  readForward: FollowOptions["readForward"],
  asked: { readonly filter: FollowOptions["filter"]; readonly start: Date; readonly intervalMs: number; readonly json: boolean },
  events: readonly AuditRecord[],
  stop: { signal: AbortSignal; release(): void },
): Promise<void> {
  const print = asked.json ? (e: AuditRecord) => io.out(`${JSON.stringify(auditJson(e))}\n`) : (e: AuditRecord) => io.out(followRow(rowCells(e)));
  if (!asked.json) io.out(followRow(FOLLOW_COLUMNS.map(([name]) => name)));
  for (const e of events) print(e);
  try {
    await followAuditLog({ readForward, filter: asked.filter, printed: events, start: asked.start, intervalMs: asked.intervalMs, stop: stop.signal, print });
  } finally {
    stop.release();
  }
}

/** The events read, once: a table, or JSON. */
function printTrail(io: CliIo, events: readonly AuditRecord[], opts: AuditOptions, since: Date): void {
  if (opts.json) {
    printJson(
      io,
      events.map((e) => ({ ...e, at: e.at.toISOString() })),
    );
    return;
  }
  printTable(
    io,
    events.map((e) => {
      const [at, type, user, client, ip, detail] = rowCells(e);
      return { at: at!, type: type!, user: user!, client: client!, ip: ip!, detail: detail! };
    }),
    `No audit events since ${iso(since)}${opts.user || opts.client || opts.type ? " matching the filter" : ""}.`,
  );
}

export function registerAuditCommand(program: Command, io: CliIo): void {
  serverOption(jsonCommand(program, "audit", "show the audit trail: sign-ins, refusals, consents, revocations, token replays (newest last)"))
    .option("--since <when>", "from this long ago (30m, 1h, 7d, 2w) or this date (ISO 8601)", "24h")
    .option("--user <subject>", "only events of this user, e.g. github:583231")
    .option("--client <id>", "only events of this client")
    .option("--type <type>", "only this event type (login.refused) or family (login)")
    .option("--limit <n>", "at most the newest n events", "1000")
    .option("--follow", "then keep printing new events as they are recorded, until Ctrl-C (with --json: one JSON object per line)")
    .option("--interval <seconds>", "with --follow: how often to look for new events", "1")
    .action(async (opts: AuditOptions) => {
      const now = new Date();
      // Usage errors before anything is opened.
      const asked = { since: parseSince(opts.since, now), subject: opts.user, clientId: opts.client, type: opts.type, limit: parseLimit(opts.limit) };
      const intervalMs = parseInterval(opts.interval);
      await withContext(io, async ({ services, config }) => {
        const filter = { ...asked, server: serverNamed(config, opts.server) };
        const { server } = filter;
        // Ctrl-C is taken from before the first line: pressed at any moment, it ends the tail, not the process.
        const stop = opts.follow ? interruption(io) : undefined;
        const events = await services.auditLog.read(filter).catch((err: unknown) => {
          stop?.release();
          throw err;
        });
        if (!stop) return printTrail(io, events, opts, filter.since);
        const followed = { subject: filter.subject, clientId: filter.clientId, type: filter.type, server };
        await followTrail(io, (f) => services.auditLog.readForward(f), { filter: followed, start: now, intervalMs, json: opts.json === true }, events, stop);
      });
    });
}
