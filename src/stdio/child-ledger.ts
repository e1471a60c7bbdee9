// The ledger of a broker's stdio children, a file under the data folder, and the start-up check
// that reads the ledgers of brokers that are gone. The watchdog (watchdog.ts) stops children when
// their broker dies; when it could not (everything was SIGKILLed at once, the watchdog too), the
// next broker started from the same data folder finds what is left and stops it.
//
// A pid alone proves nothing: the kernel reuses pids. The ledger records each child with its start
// time (Linux /proc), and each child carries the ledger's marker in its environment, which what it
// starts inherits. At start a ledger whose broker no longer runs (its pid gone, or taken by a
// process started at another time) is settled: each recorded child still running with the
// recorded start time is killed with its process group, and every process that carries the
// ledger's marker (a grandchild whose group leader is gone, one that left the group) is killed.
// Nothing is killed that cannot be verified; without /proc the pids are named in a warning.
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import type { Logger } from "../logger.ts";
import { allPids, environmentHas, hasProc, startTimeOf } from "./proc.ts";
import { firstLine } from "../lib/error-text.ts";

/** The variable every stdio child gets, naming the ledger of the broker that started it. */
export const CHILD_MARKER_VARIABLE = "MCP_AUTH_BROKER_LEDGER";

const processRecord = z.object({ pid: z.number().int().positive(), start: z.string().optional() });
const ledgerFile = z.object({ broker: processRecord, marker: z.string().min(1), children: z.array(processRecord) });
type ProcessRecord = z.infer<typeof processRecord>;
type LedgerFile = z.infer<typeof ledgerFile>;

/** Whether the broker that wrote a ledger is still running (then its children are its own business). */
function stillRunning(broker: ProcessRecord): boolean {
  if (hasProc) return broker.start !== undefined && startTimeOf(broker.pid) === broker.start;
  try {
    process.kill(broker.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as unknown;
  } catch {
    return undefined;
  }
}

function kill(pid: number, group: boolean): boolean {
  try {
    process.kill(group ? -pid : pid, "SIGKILL");
    return true;
  } catch {
    return false;
  }
}

/**
 * Stops what brokers that are gone left running from `dir`, and removes their ledgers. Returns
 * the pids killed. Synchronous: runs once at start, before any child is started.
 */
export function reapLeftovers(dir: string, log: Logger): number[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith(".json"));
  } catch {
    return [];
  }
  const settled: Array<{ file: string; ledger: LedgerFile }> = [];
  for (const name of names) {
    const file = path.join(dir, name);
    const parsed = ledgerFile.safeParse(readJson(file));
    if (!parsed.success) {
      log.warn({ file }, "an unreadable stdio ledger was removed");
      rmSync(file, { force: true });
      continue;
    }
    if (!stillRunning(parsed.data.broker)) settled.push({ file, ledger: parsed.data });
  }
  const killed = new Set<number>();
  if (!hasProc) {
    const pids = settled.flatMap((s) => s.ledger.children.map((c) => c.pid));
    if (pids.length > 0)
      log.warn(
        { pids },
        "a broker that stopped without stopping its stdio children left these pids; they cannot be verified on this system: check and kill them by hand",
      );
  } else {
    for (const { ledger } of settled) {
      for (const child of ledger.children) {
        if (child.start === undefined || startTimeOf(child.pid) !== child.start) continue;
        kill(child.pid, true);
        kill(child.pid, false);
        killed.add(child.pid);
      }
    }
    const markers = settled.map((s) => `${CHILD_MARKER_VARIABLE}=${s.ledger.marker}`);
    if (markers.length > 0) {
      for (const pid of allPids()) {
        if (pid !== process.pid && !killed.has(pid) && markers.some((m) => environmentHas(pid, m)) && kill(pid, false)) killed.add(pid);
      }
    }
  }
  for (const { file } of settled) rmSync(file, { force: true });
  if (killed.size > 0) {
    log.warn(
      { pids: [...killed] },
      "stopped stdio MCP server processes that a broker which ended without stopping them had left running (they held users' tokens)",
    );
  }
  return [...killed];
}

/** This broker's ledger: rewritten (atomically, synchronously) whenever a child starts or ends. */
export class ChildLedger {
  /** The marker value this broker's children carry in CHILD_MARKER_VARIABLE. */
  readonly marker: string;
  private readonly file: string;
  private readonly broker: ProcessRecord;
  private readonly children = new Map<number, string | undefined>();
  private failed = false;

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
  ) {
    this.marker = `${process.pid}-${randomBytes(8).toString("hex")}`;
    this.file = path.join(dir, `${this.marker}.json`);
    this.broker = { pid: process.pid, start: startTimeOf(process.pid) };
  }

  add(pid: number): void {
    this.children.set(pid, startTimeOf(pid));
    this.save();
  }

  remove(pid: number): void {
    if (this.children.delete(pid)) this.save();
  }

  /** At an orderly stop, once every child is stopped. */
  close(): void {
    rmSync(this.file, { force: true });
  }

  private save(): void {
    const content: LedgerFile = {
      broker: this.broker,
      marker: this.marker,
      children: [...this.children].map(([pid, start]) => ({ pid, ...(start === undefined ? {} : { start }) })),
    };
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const temp = `${this.file}.tmp`;
      writeFileSync(temp, `${JSON.stringify(content)}\n`, { mode: 0o600 });
      renameSync(temp, this.file);
    } catch (err) {
      // The watchdog still stops the children with the broker; only the start-up check loses them.
      if (!this.failed) {
        this.log.warn({ dir: this.dir, err: firstLine(err) }, "cannot write the stdio ledger; children left by a crash could not be found at the next start");
      }
      this.failed = true;
    }
  }
}
