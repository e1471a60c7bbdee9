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
  const owners = new LRUCache<string, string>({ max: options.maxCached ?? 100_000 });
  const lookups = new SingleFlight<string | undefined>();

  const load = (hash: string) =>
    lookups.run(hash, async () => {
      const row = await db.mcpSession.findUnique({ where: { sessionHash: hash }, select: { owner: true } });
      if (row) owners.set(hash, row.owner);
      return row?.owner;
    });

  return {
    async ownerOf(sessionId) {
      const hash = sha256Hex(sessionId);
      return owners.get(hash) ?? load(hash);
    },
    async claim(sessionId, owner) {
      const hash = sha256Hex(sessionId);
      const known = owners.get(hash);
      if (known !== undefined) return known;
      try {
        await db.mcpSession.create({ data: { sessionHash: hash, owner } });
        owners.set(hash, owner);
        return owner;
      } catch (err) {
        // Another instance (or request) bound it first: its owner stands.
        if (!isUniqueViolation(err)) throw err;
        const bound = await load(hash);
        if (bound === undefined) throw err;
        return bound;
      }
    },
    async release(sessionId) {
      const hash = sha256Hex(sessionId);
      owners.delete(hash);
      await db.mcpSession.deleteMany({ where: { sessionHash: hash } });
    },
  };
}
