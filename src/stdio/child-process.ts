// One stdio MCP server process: newline-delimited JSON-RPC on stdin/stdout (the SDK's own framing),
// stderr to the broker log, stopped with SIGTERM then SIGKILL. The child leads a process group of
// its own, so that a launcher (`npx …`, a shell script) is stopped together with what it started,
// and so is what it left running when it exited by itself. The guard (child-guard.ts) knows the
// group from the moment it exists until it is gone, so that it dies with the broker too.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../logger.ts";
import { stderrLogger } from "./stderr-log.ts";
import type { ChildGuard } from "./child-guard.ts";
import { firstLine } from "../lib/error-text.ts";

export interface ChildSpec {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string | undefined;
  readonly env: Record<string, string>;
}

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** The command could not be started at all (not found, not executable, bad folder). */
export class ChildStartFailed extends Error {}

export class StdioChild {
  /** Called for every JSON-RPC message the child writes to stdout. */
  onmessage: ((message: JSONRPCMessage) => void) | undefined;
  /** Resolves when the process has exited. */
  readonly exited: Promise<ChildExit>;
  /** Messages written to stdin so far. */
  messagesSent = 0;
  private exitInfo: ChildExit | undefined;

  private constructor(
    private readonly proc: ChildProcessWithoutNullStreams,
    log: Logger,
    guard: ChildGuard | undefined,
  ) {
    this.exited = new Promise((resolve) =>
      proc.once("exit", (code, signal) => {
        this.exitInfo = { code, signal };
        // Whatever the server started and left behind holds its user's token too. The leader's
        // pid stays reserved while its group has members, so this reaches only that group.
        this.signal("SIGKILL");
        guard?.forget(proc.pid!);
        resolve(this.exitInfo);
      }),
    );
    const buffer = new ReadBuffer();
    proc.stdout.on("data", (chunk: Buffer) => {
      try {
        buffer.append(chunk);
      } catch (err) {
        log.warn({ err: firstLine(err) }, "stdio MCP server wrote an over-long line; stopping it");
        void this.stop(0);
        return;
      }
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = buffer.readMessage();
        } catch {
          // A line that is not JSON-RPC (a stray print): MCP says stdout carries only messages.
          log.debug("stdio MCP server wrote a line that is not a JSON-RPC message; ignored");
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
    });
    // A child gone mid-write must not take the broker with it (EPIPE).
    proc.stdin.on("error", (err) => log.debug({ err: err.message }, "stdio MCP server stdin closed"));
    proc.stderr.on("data", stderrLogger(log));
  }

  /** Starts the command; resolves once the process runs, throws ChildStartFailed when it cannot. */
  static async start(spec: ChildSpec, log: Logger, guard?: ChildGuard): Promise<StdioChild> {
    const env = guard ? { [guard.marker.variable]: guard.marker.value, ...spec.env } : spec.env;
    const proc = spawn(spec.command, [...spec.args], { cwd: spec.cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    // Before anything else can run: from here on the group dies with the broker, however it dies.
    if (proc.pid !== undefined) guard?.watch(proc.pid);
    await new Promise<void>((resolve, reject) => {
      proc.once("spawn", resolve);
      proc.once("error", (err: NodeJS.ErrnoException) => {
        if (proc.pid !== undefined) guard?.forget(proc.pid);
        reject(new ChildStartFailed(`${spec.command}: ${err.code ?? err.message}`));
      });
    });
    // After a successful spawn, errors are signal failures on a process already gone.
    proc.on("error", (err) => log.debug({ err: err.message }, "stdio MCP server process error"));
    return new StdioChild(proc, log.child({ pid: proc.pid }), guard);
  }

  get pid(): number {
    return this.proc.pid!;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  /**
   * Stops reading the child's stdout (the messages of the chunk at hand are still delivered): its
   * pipe fills and its writes wait, which is how a child is told to slow down for a slow reader.
   */
  pause(): void {
    this.proc.stdout.pause();
  }

  resume(): void {
    this.proc.stdout.resume();
  }

  /** Whether reading is paused (a slow reader downstream). */
  get paused(): boolean {
    return this.proc.stdout.isPaused();
  }

  /** Writes one message to stdin; false when the child is gone. */
  send(message: JSONRPCMessage): boolean {
    if (!this.running || this.proc.stdin.destroyed) return false;
    this.proc.stdin.write(serializeMessage(message));
    this.messagesSent++;
    return true;
  }

  private signal(signal: NodeJS.Signals): void {
    try {
      // The whole group: what a launcher started goes too.
      process.kill(-this.pid, signal);
    } catch {
      // Already gone.
    }
  }

  /**
   * Closes stdin (well-behaved servers exit on it), sends SIGTERM, and SIGKILL to whatever of the
   * group is left after `graceMs`. Resolves when the child has exited.
   */
  async stop(graceMs: number): Promise<ChildExit> {
    this.proc.stdin.end();
    this.signal("SIGTERM");
    const timer = setTimeout(() => this.signal("SIGKILL"), graceMs);
    const exit = await this.exited;
    clearTimeout(timer);
    // The leader may be gone while a grandchild ignored SIGTERM.
    this.signal("SIGKILL");
    return exit;
  }
}
