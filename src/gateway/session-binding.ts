// Binds each MCP session (Mcp-Session-Id) to the caller that opened it, so a session id that
// leaks to another user cannot be used to read or drive someone else's session. A session is bound
// when the MCP server issues it (the answer to an initialize); an id never seen issued is unknown,
// and the proxy answers it 404 without forwarding it. The broker uses
// the database-backed binding (database-session-binding.ts), shared by all its instances; the
// in-memory one here serves a proxy used on its own (library use, tests).
import { boundedCache } from "../lib/bounded-cache.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";

export interface McpSessionBinding {
  /** The owner key bound to the session, or undefined when the session is unknown. */
  ownerOf(sessionId: string): Promise<string | undefined>;
  /**
   * Binds a session the MCP server has just issued to `owner` unless it is already bound; returns
   * the owner bound afterwards (the earlier one when the server issued the id twice). Must be atomic
   * in shared stores.
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
 * Single-instance binding. A forgotten (evicted or idle) session is unknown again: its next request
 * is answered 404 and the client initializes a new session.
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
