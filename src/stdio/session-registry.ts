// Every stdio MCP session of this broker process: one child each. Starts children within the limits
// (all users together, and per user), finds a session by its id, reaps idle ones, ends a revoked
// grant's sessions at once, and stops them all at shutdown. No HTTP here beyond handing the
// session's requests through.
import type { Logger } from "../logger.ts";
import type { Clock } from "../grants/clock.ts";
import type { StdioServerConfig } from "../stdio-server-config.ts";
import { childEnvironment } from "./child-environment.ts";
import { StdioChild } from "./child-process.ts";
import type { ChildGuard } from "./child-guard.ts";
import { BridgeSession, type SessionOwner } from "./bridge-session.ts";

/** Over a limit: the client may retry after `retryAfterSeconds`. */
export class ProcessLimitReached extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

export interface SessionRegistryOptions {
  readonly server: StdioServerConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Where the allow-listed variables are read from (default: the broker's environment). */
  readonly parentEnv?: NodeJS.ProcessEnv;
  /** How long a child has between SIGTERM and SIGKILL (default 2 s). */
  readonly stopGraceMs?: number;
  /** Makes the children die with the broker however it dies (the broker always gives one). */
  readonly guard?: ChildGuard;
}

export class SessionRegistry {
  /** Every live session, initialized or not (the limits count children). */
  private readonly sessions = new Set<BridgeSession>();
  private readonly byId = new Map<string, BridgeSession>();
  private readonly reaper: NodeJS.Timeout;
  private closing = false;

  constructor(private readonly options: SessionRegistryOptions) {
    const idleMs = options.server.idleSeconds * 1000;
    // Often enough that a child outlives its idle time by at most a half.
    this.reaper = setInterval(() => void this.reapIdle(), Math.min(Math.max(idleMs / 2, 250), 30_000));
    this.reaper.unref();
  }

  /** False once shutdown has begun: no new sessions, no new GET streams. */
  get accepting(): boolean {
    return !this.closing;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The pids of the running children (operators, tests). */
  pids(): number[] {
    return [...this.sessions].map((s) => s.child.pid);
  }

  find(sessionId: string): BridgeSession | undefined {
    return this.byId.get(sessionId);
  }

  /**
   * Starts a child for `owner`. Throws ProcessLimitReached over a limit, ChildStartFailed when the
   * command cannot run. The session is found by id once the transport has issued one.
   */
  async open(owner: SessionOwner): Promise<BridgeSession> {
    const { server, logger, clock } = this.options;
    const retry = Math.min(60, Math.max(1, Math.ceil(server.idleSeconds / 10)));
    if (this.closing) throw new ProcessLimitReached("The broker is shutting down; please retry.", 5);
    if (this.sessions.size >= server.maxProcesses) {
      throw new ProcessLimitReached(`The MCP server runs at most ${server.maxProcesses} sessions at once; please retry later.`, retry);
    }
    let mine = 0;
    for (const s of this.sessions) if (s.owner.key === owner.key) mine++;
    if (mine >= server.maxProcessesPerUser) {
      throw new ProcessLimitReached(`You have ${mine} MCP sessions open, the most one user may have; close one (or let it idle out) and retry.`, retry);
    }
    const token = server.tokenEnv !== undefined && owner.upstreamToken !== undefined ? { variable: server.tokenEnv, value: owner.upstreamToken } : undefined;
    const env = childEnvironment(this.options.parentEnv ?? process.env, server.env, token);
    const child = await StdioChild.start(
      { command: server.command, args: server.args, cwd: server.cwd, env },
      logger.child({ stdio: server.command }),
      this.options.guard,
    );
    const log = logger.child({ stdio: server.command, pid: child.pid, grantId: owner.grantId });
    const session = new BridgeSession(child, owner, log, () => clock.now(), { requestTimeoutMs: server.requestTimeoutSeconds * 1000 });
    this.sessions.add(session);
    session.onend = (reason) => {
      this.sessions.delete(session);
      if (session.sessionId !== undefined) this.byId.delete(session.sessionId);
      log.info({ reason }, "stdio MCP session ended");
    };
    session.oninitialized = (sessionId) => {
      if (!session.isEnded) this.byId.set(sessionId, session);
    };
    log.info("stdio MCP server started");
    return session;
  }

  /** Ends the sessions idle for MCP_STDIO_IDLE_SECONDS; their clients get 404 and start anew. */
  async reapIdle(): Promise<number> {
    const cutoff = this.options.clock.now() - this.options.server.idleSeconds * 1000;
    const idle = [...this.sessions].filter((s) => s.idle && s.lastActive <= cutoff);
    await Promise.all(idle.map((s) => s.end("idle", this.grace)));
    return idle.length;
  }

  /** Ends at once every session of these grants (revoked: CLI, /account, policy, upstream). */
  async endGrants(grantIds: readonly string[]): Promise<void> {
    const revoked = new Set(grantIds);
    await Promise.all([...this.sessions].filter((s) => revoked.has(s.owner.grantId)).map((s) => s.end("the grant was revoked", this.grace)));
  }

  /** Shutdown, first step: no new sessions, GET streams closed so that the HTTP server can drain. */
  beginShutdown(): void {
    this.closing = true;
    for (const s of this.sessions) s.closeGetStream();
  }

  /** Shutdown, last step: every child stopped (SIGTERM, then SIGKILL after the grace). */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.reaper);
    await Promise.all([...this.sessions].map((s) => s.end("the broker is shutting down", this.grace)));
    this.options.guard?.close();
  }

  private get grace(): number {
    return this.options.stopGraceMs ?? 2000;
  }
}
