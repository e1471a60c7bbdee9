// Every stdio child of this broker process: one per MCP session (legacy clients, bridge-session.ts)
// and one warm child per grant for MCP 2026-07-28 clients, which have no sessions
// (stateless-child.ts). Starts children within the limits (all users together, and per user; both
// kinds count), finds a session by its id and a grant's warm child by the grant, reaps idle ones,
// ends a revoked grant's children at once, and stops them all at shutdown. No HTTP here beyond
// handing the requests through.
import type { Logger } from "../logger.ts";
import type { Clock } from "../lib/clock.ts";
import type { StdioServerConfig } from "../config/stdio-server.ts";
import { childEnvironment } from "./child-environment.ts";
import { StdioChild } from "./child-process.ts";
import type { ChildGuard } from "./child-guard.ts";
import { BridgeSession } from "./bridge-session.ts";
import { sameOwner, type SessionOwner } from "./child-holder.ts";
import { StatelessChild } from "./stateless-child.ts";

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
  /** The variable that receives the user's connected-account token (the server's connectionInject env). */
  readonly connectionEnv?: string | undefined;
}

const DEADLINE_CHECK_MS = 1000;

/** What the registry needs of either kind of child holder. */
type Holder = BridgeSession | StatelessChild;

export class SessionRegistry {
  /** Every live holder, initialized or not (the limits count children). */
  private readonly holders = new Set<Holder>();
  private readonly byId = new Map<string, BridgeSession>();
  /** Each grant's warm child for stateless requests: `ready` while it starts, `child` once it runs. */
  private readonly warm = new Map<string, { readonly ready: Promise<StatelessChild>; child?: StatelessChild }>();
  private readonly reaper: NodeJS.Timeout;
  private readonly deadlines: NodeJS.Timeout;
  private closing = false;

  constructor(private readonly options: SessionRegistryOptions) {
    const idleMs = options.server.idleSeconds * 1000;
    // Often enough that a child outlives its idle time by at most a half.
    this.reaper = setInterval(() => void this.reapIdle(), Math.min(Math.max(idleMs / 2, 250), 30_000));
    this.reaper.unref();
    // Request deadlines by the registry's clock (tests move it), checked every second: a deadline
    // is met within a second, and no request carries a timer of its own.
    this.deadlines = setInterval(() => {
      const now = options.clock.now();
      for (const holder of this.holders) holder.expireOverdue(now);
    }, DEADLINE_CHECK_MS);
    this.deadlines.unref();
  }

  /** False once shutdown has begun: no new sessions, no new GET streams. */
  get accepting(): boolean {
    return !this.closing;
  }

  /** Children running (sessions and warm stateless children). */
  get size(): number {
    return this.holders.size;
  }

  /** The pids of the running children (operators, tests). */
  pids(): number[] {
    return [...this.holders].map((s) => s.child.pid);
  }

  find(sessionId: string): BridgeSession | undefined {
    return this.byId.get(sessionId);
  }

  /** The warm stateless children (tests, operators). */
  statelessChildren(): StatelessChild[] {
    return [...this.holders].filter((h): h is StatelessChild => h instanceof StatelessChild);
  }

  /**
   * Starts a child for `owner`'s new session. Throws ProcessLimitReached over a limit,
   * ChildStartFailed when the command cannot run. The session is found by id once the transport
   * has issued one.
   */
  async open(owner: SessionOwner): Promise<BridgeSession> {
    const { child, log } = await this.spawn(owner);
    const session = new BridgeSession(child, owner, log, () => this.options.clock.now(), { requestTimeoutMs: this.requestTimeoutMs });
    this.hold(session, log, "stdio MCP session ended");
    session.oninitialized = (sessionId) => {
      if (!session.isEnded) this.byId.set(sessionId, session);
    };
    log.info("stdio MCP server started");
    return session;
  }

  /**
   * The warm child that serves `owner`'s grant its stateless (MCP 2026-07-28) requests, started and
   * initialized on first use. A child started with another upstream token than the caller's (it
   * was renewed) is retired: it finishes what it serves, new requests go to a new child. Throws
   * ProcessLimitReached, ChildStartFailed, HandshakeFailed.
   */
  async statelessChild(owner: SessionOwner, clientInfo: unknown): Promise<StatelessChild> {
    const slot = this.warm.get(owner.grantId);
    if (slot) {
      const current = await slot.ready.catch(() => undefined);
      // Same grant, so the same user; the key is compared anyway, and the token must be this one.
      if (current && !current.isEnded && !current.isRetired && sameOwner(current.owner, owner)) {
        return current;
      }
      // Another request replaced it meanwhile: take that one.
      if (this.warm.get(owner.grantId) !== slot) return this.statelessChild(owner, clientInfo);
      this.warm.delete(owner.grantId);
      current?.retire();
    }
    const next: { ready: Promise<StatelessChild>; child?: StatelessChild } = { ready: this.startStateless(owner, clientInfo, (child) => (next.child = child)) };
    this.warm.set(owner.grantId, next);
    try {
      return await next.ready;
    } catch (err) {
      if (this.warm.get(owner.grantId) === next) this.warm.delete(owner.grantId);
      throw err;
    }
  }

  private async startStateless(owner: SessionOwner, clientInfo: unknown, started: (child: StatelessChild) => void): Promise<StatelessChild> {
    const { child, log } = await this.spawn(owner);
    const stateless = new StatelessChild(child, owner, log, () => this.options.clock.now(), { requestTimeoutMs: this.requestTimeoutMs });
    started(stateless);
    this.hold(stateless, log, "stdio MCP server for stateless requests stopped");
    try {
      await stateless.initialize(clientInfo);
    } catch (err) {
      await stateless.end("the handshake failed", this.grace);
      throw err;
    }
    return stateless;
  }

  /** Within the limits, a child with the owner's environment (its token included). */
  private async spawn(owner: SessionOwner): Promise<{ child: StdioChild; log: Logger }> {
    const { server, logger } = this.options;
    const retry = Math.min(60, Math.max(1, Math.ceil(server.idleSeconds / 10)));
    if (this.closing) throw new ProcessLimitReached("The broker is shutting down; please retry.", 5);
    if (this.holders.size >= server.maxProcesses) {
      throw new ProcessLimitReached(`The MCP server runs at most ${server.maxProcesses} sessions at once; please retry later.`, retry);
    }
    let mine = 0;
    for (const s of this.holders) if (s.owner.key === owner.key) mine++;
    if (mine >= server.maxProcessesPerUser) {
      throw new ProcessLimitReached(`You have ${mine} MCP sessions open, the most one user may have; close one (or let it idle out) and retry.`, retry);
    }
    const tokens = [
      ...(server.tokenEnv !== undefined && owner.upstreamToken !== undefined ? [{ variable: server.tokenEnv, value: owner.upstreamToken }] : []),
      ...(this.options.connectionEnv !== undefined && owner.connectionToken !== undefined
        ? [{ variable: this.options.connectionEnv, value: owner.connectionToken }]
        : []),
    ];
    const env = childEnvironment(this.options.parentEnv ?? process.env, server.env, tokens);
    const child = await StdioChild.start(
      { command: server.command, args: server.args, cwd: server.cwd, env },
      logger.child({ stdio: server.command }),
      this.options.guard,
    );
    return { child, log: logger.child({ stdio: server.command, pid: child.pid, grantId: owner.grantId }) };
  }

  private hold(holder: Holder, log: Logger, ended: string): void {
    this.holders.add(holder);
    holder.onend = (reason) => {
      this.holders.delete(holder);
      if (holder instanceof BridgeSession && holder.sessionId !== undefined) this.byId.delete(holder.sessionId);
      if (holder instanceof StatelessChild && this.warm.get(holder.owner.grantId)?.child === holder) this.warm.delete(holder.owner.grantId);
      log.info({ reason }, ended);
    };
  }

  /** Ends the children idle for MCP_STDIO_IDLE_SECONDS; session clients get 404 and start anew. */
  async reapIdle(): Promise<number> {
    const cutoff = this.options.clock.now() - this.options.server.idleSeconds * 1000;
    const idle = [...this.holders].filter((s) => s.idle && s.lastActive <= cutoff);
    await Promise.all(idle.map((s) => s.end("idle", this.grace)));
    return idle.length;
  }

  /** Ends at once every child of these grants (revoked: CLI, /account, policy, upstream). */
  async endGrants(grantIds: readonly string[]): Promise<void> {
    const revoked = new Set(grantIds);
    await Promise.all([...this.holders].filter((s) => revoked.has(s.owner.grantId)).map((s) => s.end("the grant was revoked", this.grace)));
  }

  /** Shutdown, first step: no new children, GET streams closed so that the HTTP server can drain. */
  beginShutdown(): void {
    this.closing = true;
    for (const s of this.holders) if (s instanceof BridgeSession) s.closeGetStream();
  }

  /** Shutdown, last step: every child stopped (SIGTERM, then SIGKILL after the grace). */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.reaper);
    clearInterval(this.deadlines);
    await Promise.all([...this.holders].map((s) => s.end("the broker is shutting down", this.grace)));
    this.options.guard?.close();
  }

  private get grace(): number {
    return this.options.stopGraceMs ?? 2000;
  }

  private get requestTimeoutMs(): number {
    return this.options.server.requestTimeoutSeconds * 1000;
  }
}
