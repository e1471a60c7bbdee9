// Carries revocations made elsewhere (the operator CLI, other broker instances sharing the
// database) to this process's caches: on PostgreSQL at once through LISTEN/NOTIFY (the hot store's
// listenForRevocations), and everywhere by a background poll of recently revoked grants and access
// tokens, which also covers what a notification connection missed while it was down. Both deliver
// on the same RevocationBus as local revocations. Never on the request path.
import type { GrantsContext, RevocationBus } from "./context.ts";
import { firstLine } from "../lib/error-text.ts";

/** Rows revoked up to this long before the newest one seen are read again (clock skew between instances). */
const OVERLAP_MS = 2000;

export class RevocationFeed {
  private cursor: Date;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopListening: (() => Promise<void>) | undefined;

  constructor(
    private readonly ctx: GrantsContext,
    private readonly bus: RevocationBus,
  ) {
    // Not the grants clock: the cursor follows timestamps that other processes wrote with theirs;
    // it only starts from this machine's time and then moves with the rows it reads.
    this.cursor = new Date(Date.now() - OVERLAP_MS);
  }

  /** Polls every `intervalMs`; on PostgreSQL also hears other instances' revocations at once (NOTIFY). */
  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.poll(), intervalMs);
    this.timer.unref();
    this.stopListening = this.ctx.hot.listenForRevocations(
      (revocation) => this.bus.deliver(revocation),
      (err) => this.ctx.logger.warn({ err: firstLine(err) }, "revocation notifications interrupted; polling meanwhile"),
    );
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.stopListening?.();
    await this.running;
  }

  /** When polls started failing (an outage in progress), by the system clock. */
  private failingSince: number | undefined;

  /** One poll; concurrent calls share it. */
  poll(): Promise<void> {
    this.running ??= this.pollOnce().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pollOnce(): Promise<void> {
    const since = new Date(this.cursor.getTime() - OVERLAP_MS);
    try {
      const { grants, tokens } = await this.ctx.hot.revokedSince(since);
      const newest = Math.max(this.cursor.getTime(), ...grants.map((g) => g.revokedAt.getTime()), ...tokens.map((t) => t.revokedAt.getTime()));
      this.cursor = new Date(newest);
      this.bus.deliver({ grantIds: grants.map((g) => g.id), tokenHashes: tokens.map((t) => t.tokenHash) });
      if (this.failingSince !== undefined) {
        this.ctx.logger.info({ seconds: Math.round((Date.now() - this.failingSince) / 1000) }, "the database answers the revocation feed again");
        this.failingSince = undefined;
      }
    } catch (err) {
      // An outage is two lines, when it starts and when it ends: not one per poll.
      if (this.failingSince !== undefined) return;
      this.failingSince = Date.now();
      this.ctx.logger.warn({ err: firstLine(err) }, "the revocation feed cannot read the database; polling on, and saying so when it answers again");
    }
  }
}
