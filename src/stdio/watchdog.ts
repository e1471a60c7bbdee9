// Stdio children must die with the broker however it dies, SIGKILL and out-of-memory included:
// they hold their user's upstream token. A process that is killed runs no code, so the broker
// cannot do it itself; Linux's PR_SET_PDEATHSIG needs prctl (a native addon, or util-linux's
// `setpriv`, absent on Alpine, macOS and distroless images) and would reach only the direct child,
// never what it started. So one small Node process per broker watches instead: the broker holds
// the write end of its stdin, the kernel closes that pipe whenever the broker ends, and on EOF the
// watchdog kills every process group the broker told it about (SIGTERM, then SIGKILL after the
// grace). Each child leads its own group (child-process.ts), so grandchildren go too.
//
// The watchdog runs in a session of its own, so that neither a Ctrl-C at the terminal nor a kill
// of the broker's process group reaches it, and it ignores SIGTERM, SIGINT and SIGHUP: it ends
// only when the broker has. It gets an empty environment: none of the broker's secrets. What it
// cannot survive (SIGKILL of everything at once, a reboot) the broker's next start cleans up from
// the ledger (child-ledger.ts).
import { spawn, type ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import type { Logger } from "../logger.ts";

/**
 * The watchdog's program, run with `node -e` so that it is the same from the sources and from
 * dist/ (no file to find, no TypeScript loader). Lines on stdin: `+<pgid>` watch, `-<pgid>` forget.
 */
const PROGRAM = `"use strict"; // mcp-auth-broker stdio watchdog
const grace = Number(process.argv[1]) || 2000;
const groups = new Set();
for (const s of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(s, () => {});
const killAll = (signal) => {
  for (const g of groups) {
    try { process.kill(-g, signal); } catch { /* the group is gone already: nothing left to stop */ }
  }
};
let partial = "";
let ended = false;
const end = () => {
  if (ended) return;
  ended = true;
  killAll("SIGTERM");
  setTimeout(() => { killAll("SIGKILL"); process.exit(0); }, groups.size > 0 ? grace : 0);
};
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  const lines = (partial + chunk).split("\\n");
  partial = lines.pop();
  for (const line of lines) {
    const pgid = Number(line.slice(1));
    if (!Number.isSafeInteger(pgid) || pgid <= 1) continue;
    if (line[0] === "+") groups.add(pgid);
    else if (line[0] === "-") groups.delete(pgid);
  }
});
process.stdin.on("end", end);
process.stdin.on("error", end);
`;

const MAX_RESTARTS = 10;

export class Watchdog {
  private proc: ChildProcess | undefined;
  private readonly groups = new Set<number>();
  private closed = false;
  private restarts = 0;

  constructor(
    private readonly log: Logger,
    /** Between SIGTERM and SIGKILL once the broker is gone. */
    private readonly graceMs = 2000,
  ) {}

  /** The watchdog's pid, once started (tests). */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** From now on, the group `pgid` dies with the broker. Synchronous: called right after spawn. */
  watch(pgid: number): void {
    this.groups.add(pgid);
    this.write(`+${pgid}\n`);
  }

  /** The group is gone (its leader exited, the group was killed): nothing to kill later. */
  forget(pgid: number): void {
    if (this.groups.delete(pgid)) this.write(`-${pgid}\n`);
  }

  /** At the broker's orderly stop, after its children are stopped: the watchdog exits. */
  close(): void {
    this.closed = true;
    this.proc?.stdin?.end();
  }

  private write(line: string): void {
    if (this.closed) return;
    const proc = this.proc ?? this.start();
    proc.stdin?.write(line);
  }

  private start(): ChildProcess {
    const proc = spawn(process.execPath, ["-e", PROGRAM, String(this.graceMs)], {
      stdio: ["pipe", "ignore", "ignore"],
      detached: true,
      env: {},
    });
    this.proc = proc;
    // Neither the watchdog nor the pipe to it may keep the broker's event loop alive.
    proc.unref();
    (proc.stdin as unknown as Socket).unref();
    proc.stdin?.on("error", (err) => this.log.debug({ err: err.message }, "stdio watchdog pipe"));
    proc.on("error", (err) => this.log.error({ err: err.message }, "the stdio watchdog could not be started"));
    proc.once("exit", (code, signal) => {
      if (this.proc === proc) this.proc = undefined;
      if (this.closed) return;
      // Someone killed it: a new one takes over every group still running (a few times, not in a loop).
      if (++this.restarts > MAX_RESTARTS) {
        this.log.error({ code, signal }, "the stdio watchdog keeps exiting; stdio children may outlive a crash of the broker");
        return;
      }
      this.log.warn({ code, signal }, "the stdio watchdog exited while the broker runs; starting another");
      if (this.groups.size > 0) {
        const next = this.start();
        next.stdin?.write([...this.groups].map((g) => `+${g}\n`).join(""));
      }
    });
    return proc;
  }
}
