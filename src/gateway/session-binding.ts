// Binds each MCP session (Mcp-Session-Id) to the caller that opened it, so a session id that
// leaks to another user cannot be used to read or drive someone else's session. The broker uses
// the database-backed binding (database-session-binding.ts), shared by all its instances; the
// in-memory one here serves a proxy used on its own (library use, tests).
import { boundedCache } from "../grants/bounded-cache.ts";
import type { CallerIdentity } from "./identity.ts";

export interface McpSessionBinding {
  /** The owner key bound to the session, or undefined when the session is unknown. */
  ownerOf(sessionId: string): Promise<string | undefined>;
  /**
   * Binds the session to `owner` unless it is already bound; returns the owner bound afterwards
   * (the earlier one when another caller got there first). Must be atomic in shared stores.
   */
  claim(sessionId: string, owner: string): Promise<string>;
  /** Forgets the session (it has ended). */
  release(sessionId: string): Promise<void>;
}

/** The owner of a caller's sessions: the user, or the client itself for client_credentials. */
export function sessionOwnerKey(identity: Pick<CallerIdentity, "subject" | "clientId">): string {
  return identity.subject ?? `client:${identity.clientId}`;
}

export interface MemorySessionBindingOptions {
  /** Most sessions remembered; the least recently used is forgotten first. */
  readonly maxSessions?: number;
  /** A session unused this long is forgotten. */
  readonly idleTtlMs?: number;
  /** Time source in milliseconds (tests). */
  readonly clock?: { now(): number };
}

/**
 * Single-instance binding. A forgotten (evicted) session is "unknown" again and is re-bound to
 * the next caller the MCP server accepts it from; session ids are unguessable, so in practice
 * that is its owner.
 */
export function createMemorySessionBinding(options: MemorySessionBindingOptions = {}): McpSessionBinding {
  const owners = boundedCache<string, string>(options.maxSessions ?? 100_000, {
    ttl: options.idleTtlMs ?? 24 * 60 * 60 * 1000,
    updateAgeOnGet: true,
    ...(options.clock ? { perf: options.clock, ttlResolution: 0 } : {}),
  });
  return {
    async ownerOf(sessionId) {
      return owners.get(sessionId);
    },
    async claim(sessionId, owner) {
      const existing = owners.get(sessionId);
      if (existing !== undefined) return existing;
      owners.set(sessionId, owner);
      return owner;
    },
    async release(sessionId) {
      owners.delete(sessionId);
    },
  };
}
