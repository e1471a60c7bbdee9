// What /mcp answers when the server needs a connected account the user no longer has (never
// connected, revoked at the service, refresh refused): nothing goes to the server, which could do
// nothing with it, and the user is told how to fix it without guessing.
// - A client that declared URL-mode elicitation (MCP 2025-11-25 "URL Elicitation Required Error";
//   2026-07-28 clients declare capabilities per request in `_meta`) gets the JSON-RPC error
//   -32042 with a link to PUBLIC_URL/account/connect/<name>; its grant stays, and the retried
//   request succeeds once the account is connected.
// - Any other client gets 401 invalid_token and its grant ends: its new authorization passes
//   through the consent page, which asks to connect the account.
import type Koa from "koa";
import { randomUUID } from "node:crypto";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { OAuthError } from "../http/errors.ts";
import { challenge, type ChallengeOptions } from "./bearer.ts";
import { CHECKED_BODY_BYTES, upstreamBody } from "./request-body.ts";
import { boundedCache } from "../lib/bounded-cache.ts";

/** MCP's URLElicitationRequiredError code. */
export const URL_ELICITATION_REQUIRED = -32042;
const CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities";

/**
 * The grants whose client declared URL-mode elicitation when it initialized its session (the
 * 2025-11-25 clients declare capabilities once, at initialize, not per request): their later
 * requests get -32042 too. Kept in this process, a bounded number; a client that initialized at
 * another instance gets the 401 path, which also leads the user to connect.
 */
export class ElicitingGrants {
  private readonly grants = boundedCache<string, true>(10_000);

  /** Notes an initialize of this grant's client that declared URL-mode elicitation (a body read whole). */
  noteInitialize(grantId: string, body: Buffer): void {
    // Only an initialize is worth parsing: the other requests of a session declare nothing.
    if (!body.includes('"initialize"')) return;
    try {
      const parsed: unknown = JSON.parse(body.toString("utf8"));
      const messages = (Array.isArray(parsed) ? parsed : [parsed]).map(objectOf);
      if (messages.some((m) => m?.method === "initialize" && declaresUrlElicitation(m))) this.grants.set(grantId, true);
    } catch {
      // Not JSON: the MCP server answers it.
    }
  }

  declared(grantId: string): boolean {
    return this.grants.has(grantId);
  }
}

export interface ConnectionGate {
  /** PUBLIC_URL/account/connect/<name>. */
  connectUrl(name: string): string;
  /** How pages name the service ("GitHub"). */
  title(name: string): string;
  /** Ends the caller's grant (the client authorizes again, through the connect step). */
  endGrant(identity: CallerIdentity): Promise<void>;
  readonly challenge: ChallengeOptions;
  readonly eliciting: ElicitingGrants;
}

type Json = Record<string, unknown>;
const objectOf = (value: unknown): Json | undefined => (typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined);

/** Whether a JSON-RPC request declares URL-mode elicitation: in its `_meta` (2026-07-28) or, an initialize, in its capabilities. */
function declaresUrlElicitation(message: Json): boolean {
  const params = objectOf(message.params);
  const perRequest = objectOf(objectOf(params?._meta)?.[CLIENT_CAPABILITIES_META]);
  const atInitialize = message.method === "initialize" ? objectOf(params?.capabilities) : undefined;
  return [perRequest, atInitialize].some((capabilities) => objectOf(objectOf(capabilities?.elicitation)?.url) !== undefined);
}

/** The requests (with an id) of a POST body, none when it is not JSON-RPC; whether it was a batch. */
async function requestsOf(ctx: Koa.Context): Promise<{ readonly requests: Json[]; readonly batch: boolean }> {
  const none = { requests: [], batch: false };
  if (ctx.method !== "POST") return none;
  const body = await upstreamBody(ctx.req, AbortSignal.timeout(30_000), true).catch(() => null);
  if (!Buffer.isBuffer(body) || body.length > CHECKED_BODY_BYTES) return none;
  try {
    const parsed: unknown = JSON.parse(body.toString("utf8"));
    const messages = Array.isArray(parsed) ? parsed : [parsed];
    return {
      requests: messages.map(objectOf).filter((m): m is Json => m !== undefined && "id" in m && typeof m.method === "string"),
      batch: Array.isArray(parsed),
    };
  } catch {
    return none;
  }
}

/** Answers a request whose connected account is missing; resolves once answered. */
export async function answerMissingConnection(ctx: Koa.Context, identity: CallerIdentity, gate: ConnectionGate): Promise<void> {
  const connection = identity.connection;
  if (!connection?.missing) return;
  const { requests, batch } = await requestsOf(ctx);
  const title = gate.title(connection.name);
  const eliciting = gate.eliciting.declared(identity.grantId) || (requests.length > 0 && requests.every(declaresUrlElicitation));
  if (eliciting && requests.length === 0) {
    // A client that can be sent to connect keeps its grant: what is not a request (a
    // notification, a response, the standalone stream, the session's end) is taken and dropped.
    ctx.status = ctx.method === "GET" ? 405 : ctx.method === "DELETE" ? 204 : 202;
    if (ctx.status === 405) ctx.set("Allow", "POST, DELETE");
    return;
  }
  if (eliciting) {
    const message = `Connect your ${title} account to continue: this server acts on ${title} with your own account.`;
    const elicitation = { mode: "url", elicitationId: randomUUID(), url: gate.connectUrl(connection.name), message };
    const errors = requests.map((r) => ({
      jsonrpc: "2.0",
      id: r.id,
      error: { code: URL_ELICITATION_REQUIRED, message, data: { elicitations: [elicitation] } },
    }));
    ctx.status = 200;
    ctx.set("Cache-Control", "no-store");
    ctx.body = batch ? errors : errors[0];
    return;
  }
  await gate.endGrant(identity);
  const description = `Your ${title} account is ${connection.missing === "revoked" ? "no longer connected" : "not connected"}; authorize again to connect it.`;
  throw new OAuthError("invalid_token", description, {
    status: 401,
    headers: { "WWW-Authenticate": challenge(gate.challenge, { code: "invalid_token", description }) },
  });
}
