// grant_type=urn:ietf:params:oauth:grant-type:token-exchange (RFC 8693), for MCP servers that fetch
// a user's connected-account token themselves instead of receiving it with each request. The
// server authenticates as a confidential client the operator registered and named in its catalogue
// entry (`exchangeClients`); its subject token is the X-Auth-Assertion the broker sent it (a JWT
// whose audience is that server); `resource` or `audience` names the connection. Answer: the
// user's current token for that connection (refreshed if needed), and nothing for a connection the
// server does not name, a user whose grant for it ended, or an assertion made for another server.
import { createLocalJWKSet, jwtVerify, type JWTPayload } from "jose";
import { z } from "zod";
import type { McpServerEntry } from "../../config/catalogue.ts";
import { dateOf } from "../../lib/clock.ts";
import { audit } from "../audit.ts";
import { InvalidGrant, InvalidRequest, InvalidTarget, UnauthorizedClient } from "../errors.ts";
import { grantDeathReason } from "../lifecycle.ts";
import { ACCESS_TOKEN_TYPE, type ExchangedTokenResponse, type RegisteredClient } from "../types.ts";
import type { GrantHandler, TokenContext } from "./context.ts";
import { parseParameters, required } from "./parameters.ts";

export const JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt";

const Parameters = z.object({
  subject_token: required("subject_token"),
  subject_token_type: required("subject_token_type").refine((t) => t === JWT_TOKEN_TYPE, {
    error: `subject_token_type must be ${JWT_TOKEN_TYPE}: the subject token is the X-Auth-Assertion the server received.`,
  }),
  resource: z.string().optional(),
  audience: z.string().optional(),
  requested_token_type: z
    .string()
    .optional()
    .refine((t) => t === undefined || t === ACCESS_TOKEN_TYPE, { error: `requested_token_type can only be ${ACCESS_TOKEN_TYPE}.` }),
});

/** The server this client speaks for: the one whose entry names it; a client that is none is refused. */
function serverOf(t: TokenContext, client: RegisteredClient): McpServerEntry {
  if (client.tokenEndpointAuthMethod === "none" || client.registrationType !== "manual")
    throw new UnauthorizedClient("token exchange is only for confidential clients the operator registered for an MCP server (exchangeClients).");
  const server = t.config.catalogue.servers.find((s) => s.exchangeClients?.includes(client.id));
  if (!server) throw new UnauthorizedClient(`no server of the configuration names this client in exchangeClients: add ${client.id} to its entry.`);
  return server;
}

/** The assertion's claims, verified: signed by the broker, for this server, not expired. */
async function verifiedAssertion(t: TokenContext, token: string, server: McpServerEntry): Promise<JWTPayload & { sub: string }> {
  try {
    const keys = createLocalJWKSet({ keys: await t.signingKeys.published() });
    const { payload } = await jwtVerify(token, keys, {
      issuer: t.config.publicUrl,
      audience: server.resourceUrl,
      algorithms: ["ES256"],
      currentDate: dateOf(t.clock),
    });
    if (typeof payload.sub !== "string" || typeof payload.client_id !== "string") throw new Error("it names no user or client");
    return payload as JWTPayload & { sub: string };
  } catch (err) {
    throw new InvalidGrant(
      `the subject_token is not an identity assertion the broker made for this server (${err instanceof Error ? err.message : String(err)}).`,
    );
  }
}

export function tokenExchangeGrant(t: TokenContext): GrantHandler {
  return async (client, params) => {
    const server = serverOf(t, client);
    const p = parseParameters(Parameters, params);
    const name = p.resource ?? p.audience;
    if (!name) throw new InvalidRequest("name the connection whose token is wanted in resource or audience.");
    if (p.resource !== undefined && p.audience !== undefined && p.resource !== p.audience)
      throw new InvalidTarget("resource and audience name different connections.");
    const claims = await verifiedAssertion(t, p.subject_token, server);
    if (server.connection?.name !== name)
      throw new InvalidTarget(`this server may only exchange for its own connection${server.connection ? ` (${server.connection.name})` : ""}.`);
    // The user's grant behind the assertion must still be alive: a revoked app gets nothing.
    const grant = await t.db.grant.findFirst({
      where: { subject: claims.sub, clientId: String(claims.client_id), resource: server.resourceUrl, revokedAt: null },
      orderBy: { createdAt: "desc" },
    });
    if (!grant || grantDeathReason(grant, dateOf(t.clock))) throw new InvalidGrant("the user's authorization for this server has ended.");
    const state = await t.connections.tokenFor(claims.sub, name, grant.upstreamSessionId);
    if (state.status !== "ok")
      throw new InvalidGrant(`the user has no working ${name} connection: they connect it at ${t.config.publicUrl}/account/connect/${name}.`);
    await audit(t.db, {
      type: "connection.token_exchanged",
      clientId: client.id,
      grantId: grant.id,
      subject: claims.sub,
      detail: { server: server.name, connection: name },
    });
    const response: ExchangedTokenResponse = {
      access_token: state.token,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: "Bearer",
      ...(Number.isFinite(state.validUntil) ? { expires_in: Math.max(1, Math.floor((state.validUntil - t.clock.now()) / 1000)) } : {}),
    };
    return response;
  };
}
