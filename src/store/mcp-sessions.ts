// Who owns each MCP session, in the database every broker instance shares. Only SHA-256 hashes of
// the session ids are stored (an id lets its holder drive the session). The first claim of a
// session wins, atomically across instances: the primary key decides. No caching here: what an
// instance may remember is the gateway's policy (gateway/database-session-binding.ts).
import type { Database } from "./db.ts";
import { sha256Hex } from "./secrets.ts";

export interface McpSessionStore {
  /** The owner bound to the session, or undefined when the session is unknown. */
  ownerOf(sessionId: string): Promise<string | undefined>;
  /** Binds the session to `owner` unless it is bound already; returns the owner bound afterwards. */
  claim(sessionId: string, owner: string): Promise<string>;
  /** Forgets the session (it has ended). */
  release(sessionId: string): Promise<void>;
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "P2002";
}

export function createMcpSessionStore(database: Pick<Database, "db">): McpSessionStore {
  const { db } = database;
  const ownerOf = async (sessionId: string) =>
    (await db.mcpSession.findUnique({ where: { sessionHash: sha256Hex(sessionId) }, select: { owner: true } }))?.owner;
  return {
    ownerOf,
    async claim(sessionId, owner) {
      try {
        await db.mcpSession.create({ data: { sessionHash: sha256Hex(sessionId), owner } });
        return owner;
      } catch (err) {
        // Another instance (or request) bound it first: its owner stands.
        if (!isUniqueViolation(err)) throw err;
        const bound = await ownerOf(sessionId);
        if (bound === undefined) throw err;
        return bound;
      }
    },
    async release(sessionId) {
      await db.mcpSession.deleteMany({ where: { sessionHash: sha256Hex(sessionId) } });
    },
  };
}
