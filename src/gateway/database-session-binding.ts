// MCP session binding shared by every broker instance through the database. The owner of a
// session never changes once bound, so each instance keeps what it has seen in memory: after a
// session's first request on an instance, its requests there touch the database no more.
import { LRUCache } from "lru-cache";
import type { Db } from "../store/db.ts";
import { sha256Hex } from "../store/secrets.ts";
import { SingleFlight } from "../grants/single-flight.ts";
import type { McpSessionBinding } from "./session-binding.ts";

export interface DatabaseSessionBindingOptions {
  /** Most session owners remembered in this process (least recently used forgotten first). */
  readonly maxCached?: number;
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "P2002";
}

export function createDatabaseSessionBinding(db: Db, options: DatabaseSessionBindingOptions = {}): McpSessionBinding {
  // Keyed by the session id itself (it is in this process's memory anyway): only the database
  // sees hashes, and a request answered from memory hashes nothing.
  const owners = new LRUCache<string, string>({ max: options.maxCached ?? 100_000 });
  const lookups = new SingleFlight<string | undefined>();

  const load = (sessionId: string) =>
    lookups.run(sessionId, async () => {
      const row = await db.mcpSession.findUnique({ where: { sessionHash: sha256Hex(sessionId) }, select: { owner: true } });
      if (row) owners.set(sessionId, row.owner);
      return row?.owner;
    });

  return {
    async ownerOf(sessionId) {
      return owners.get(sessionId) ?? load(sessionId);
    },
    async claim(sessionId, owner) {
      const known = owners.get(sessionId);
      if (known !== undefined) return known;
      try {
        await db.mcpSession.create({ data: { sessionHash: sha256Hex(sessionId), owner } });
        owners.set(sessionId, owner);
        return owner;
      } catch (err) {
        // Another instance (or request) bound it first: its owner stands.
        if (!isUniqueViolation(err)) throw err;
        const bound = await load(sessionId);
        if (bound === undefined) throw err;
        return bound;
      }
    },
    async release(sessionId) {
      owners.delete(sessionId);
      await db.mcpSession.deleteMany({ where: { sessionHash: sha256Hex(sessionId) } });
    },
  };
}
