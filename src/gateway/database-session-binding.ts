// MCP session binding shared by every broker instance through the database (store/mcp-sessions.ts).
// The owner of a session never changes once bound, so each instance keeps what it has seen in
// memory: after a session's first request on an instance, its requests there touch the database
// no more. That caching is the gateway's policy, built on the store's first-claim-wins rule.
import { boundedCache } from "../lib/bounded-cache.ts";
import type { McpSessionStore } from "../store/mcp-sessions.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import type { McpSessionBinding } from "./session-binding.ts";

export interface DatabaseSessionBindingOptions {
  /** Most session owners remembered in this process (least recently used forgotten first). */
  readonly maxCached?: number;
}

/** The binding over a shared store, remembering in this process every owner it has seen. */
export function cachedSessionBinding(store: McpSessionStore, options: DatabaseSessionBindingOptions = {}): McpSessionBinding {
  // Keyed by the session id itself (it is in this process's memory anyway): only the database
  // sees hashes, and a request answered from memory hashes nothing.
  const owners = boundedCache<string, string>(options.maxCached ?? 100_000);
  const lookups = new SingleFlight<string | undefined>();

  const load = (sessionId: string) =>
    lookups.run(sessionId, async () => {
      const owner = await store.ownerOf(sessionId);
      if (owner !== undefined) owners.set(sessionId, owner);
      return owner;
    });

  return {
    async ownerOf(sessionId) {
      return owners.get(sessionId) ?? load(sessionId);
    },
    async claim(sessionId, owner) {
      const known = owners.get(sessionId);
      if (known !== undefined) return known;
      const bound = await store.claim(sessionId, owner);
      owners.set(sessionId, bound);
      return bound;
    },
    async release(sessionId) {
      owners.delete(sessionId);
      await store.release(sessionId);
    },
  };
}
