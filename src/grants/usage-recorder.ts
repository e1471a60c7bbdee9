// Records when grants were last used, for the idle timeout, without a database write per request:
// at most one write per grant per interval (a minute, or a quarter of a short idle timeout).
import type { GrantsContext } from "./context.ts";
import { firstLine } from "../lib/error-text.ts";

export class UsageRecorder {
  private readonly lastWritten = new Map<string, number>();
  private readonly intervalMs: number;
  private readonly pending = new Set<Promise<unknown>>();

  constructor(private readonly ctx: GrantsContext) {
    this.intervalMs = Math.min(60_000, (ctx.config.sessionIdleTimeoutSeconds * 1000) / 4);
  }

  /** What the store already knows (e.g. the grant was just used to issue the token). */
  seen(grantId: string, lastUsedAt: Date): void {
    const known = this.lastWritten.get(grantId) ?? 0;
    if (lastUsedAt.getTime() > known) this.lastWritten.set(grantId, lastUsedAt.getTime());
  }

  touch(grantId: string, now: number = this.ctx.clock.now()): void {
    const last = this.lastWritten.get(grantId) ?? 0;
    if (now - last < this.intervalMs) return;
    this.lastWritten.set(grantId, now);
    // A grant already past a deadline stays dead: use cannot resurrect it (the store checks).
    const write = this.ctx.hot
      .recordGrantUse({ grantId, lastUsedAt: new Date(now), idleExpiresAt: new Date(now + this.ctx.config.sessionIdleTimeoutSeconds * 1000) })
      .catch((err: unknown) => this.ctx.logger.warn({ err: firstLine(err), grantId }, "could not record grant use"))
      .finally(() => this.pending.delete(write));
    this.pending.add(write);
    if (this.lastWritten.size > 100_000) this.lastWritten.clear();
  }

  /** Waits for writes in flight (shutdown, tests). */
  async flush(): Promise<void> {
    await Promise.all([...this.pending]);
  }
}
