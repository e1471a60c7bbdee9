// What the grants services share: storage, configuration, the upstream provider, the clock, and
// the one place that decides when cached validations must go (revocation listeners).
import type { Config } from "../config/load.ts";
import type { Logger } from "../logger.ts";
import type { Db } from "../store/db.ts";
import type { HotStore } from "../store/hot-store.ts";
import type { SecretBox } from "../store/secrets.ts";
import type { UpstreamProvider } from "../upstream/provider.ts";
import type { Clock } from "../lib/clock.ts";
import type { AccessPolicy } from "./policy.ts";

export interface GrantsContext {
  /** Prisma, for the cold paths. */
  readonly db: Db;
  /** The per-token statements (refresh, code exchange, validation, re-check). */
  readonly hot: HotStore;
  readonly config: Config;
  readonly secrets: SecretBox;
  readonly provider: UpstreamProvider;
  readonly logger: Logger;
  /** Key for derived (idempotent) refresh rotation; separate from the encryption key. */
  readonly rotationKey: Uint8Array;
  /** Every time decision of the grants code reads this clock (tests move it instead of sleeping). */
  readonly clock: Clock;
  /** Who may sign in (and stay signed in): applied at login and at every upstream re-check. */
  readonly policy: AccessPolicy;
}

export interface Revocation {
  /** Grants revoked with all their tokens. */
  readonly grantIds?: readonly string[];
  /** Single access tokens revoked (SHA-256 hashes). */
  readonly tokenHashes?: readonly string[];
}

/**
 * Invalidation fan-out: every cache that holds validations subscribes here. This is the one place
 * that decides when cached validations go; a multi-instance deployment publishes here from a
 * shared channel too.
 */
export class RevocationBus {
  private readonly listeners = new Set<(revocation: Revocation) => void>();

  /**
   * @param announce tells the other instances sharing the database about a revocation made here
   * (the hot store's announceRevocation); best effort, their poll catches up when it fails.
   */
  constructor(private readonly announce: (revocation: Revocation) => Promise<void> = async () => undefined) {}

  subscribe(listener: (revocation: Revocation) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A revocation made in this process (committed): to this process's caches and to the other instances. */
  publish(revocation: Revocation): void {
    if (!this.deliver(revocation)) return;
    this.announce(revocation).catch(() => undefined);
  }

  /** A revocation made elsewhere (announced, or found by the poll): to this process's caches only. */
  deliver(revocation: Revocation): boolean {
    if (!revocation.grantIds?.length && !revocation.tokenHashes?.length) return false;
    for (const l of this.listeners) l(revocation);
    return true;
  }
}
