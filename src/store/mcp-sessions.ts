// Who owns each MCP session, in the database every broker instance shares: a row is written when
// the MCP server issues the session, so any instance knows it (and refuses ids without a row).
// Only SHA-256 hashes of the session ids are stored (an id lets its holder drive the session). The
// first claim of a session wins, atomically across instances: the primary key decides. No caching here: what an
// instance may remember is the gateway's policy (gateway/database-session-binding.ts).
import type { Database } from "./db.ts";
import { sha256Hex } from "../crypto/tokens.ts";

export interface McpSessionStore {
  /** The owner bound to the session, or undefined when the session is unknown. */
  ownerOf(sessionId: string): Promise<string | undefined>;
  /** Binds the session to `owner` unless it is bound already; returns the owner bound afterwards. */
  claim(sessionId: string, owner: string): Promise<string>;
  /** Forgets the session (it has ended). */
  release(sessionId: string): Promise<void>;
}

export function createMcpSessionStore(database: Pick<Database, "hot">): McpSessionStore {
  const { hot } = database;
  return {
    ownerOf: async (sessionId) => (await hot.mcpSessionOwner(sha256Hex(sessionId))) ?? undefined,
    claim: (sessionId, owner) => hot.claimMcpSession({ sessionHash: sha256Hex(sessionId), owner, createdAt: new Date() }),
    release: (sessionId) => hot.releaseMcpSession(sha256Hex(sessionId)),
  };
}
