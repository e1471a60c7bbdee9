// grant_type=client_credentials (OAuth 2.1 §4.2): a machine client acting for itself. Only
// confidential clients the operator registered may use it: their tokens carry no user, so a
// self-registered one would reach the MCP server with no login at all. No refresh token.
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { audit } from "../audit.ts";
import { dateOf } from "../../lib/clock.ts";
import { UnauthorizedClient } from "../errors.ts";
import { initialDeadlines } from "../lifecycle.ts";
import { resolveScope } from "../scope.ts";
import { machineSubject } from "../types.ts";
import type { GrantHandler, TokenContext } from "./context.ts";
import { issueTokens } from "./issue.ts";
import { optionalResource, parseParameters } from "./parameters.ts";
import { protectedResources, resolveResource } from "../resource.ts";

export function clientCredentialsGrant(t: TokenContext): GrantHandler {
  const Parameters = z.object({
    resource: optionalResource(protectedResources(t.config)),
    scope: z.string().optional(),
  });

  return async (client, params) => {
    const p = parseParameters(Parameters, params);
    const scope = resolveScope(p.scope, client.scope, t.config.clients.scopes.supported, t.config.clients.scopes.implies);
    // That the client registered this grant type at all is checked for every grant (token/index.ts).
    if (client.tokenEndpointAuthMethod === "none") {
      throw new UnauthorizedClient("client_credentials requires a confidential client (one with a client secret).");
    }
    // Registrations made before /register refused client_credentials may still say so.
    if (client.registrationType !== "manual") {
      throw new UnauthorizedClient(
        "client_credentials is only for machine clients the operator registered (npx mcp-auth-broker clients add --grant-type client_credentials).",
      );
    }
    // A machine client is subject to the access policy like a user: the operator names it.
    const admitted = t.policy.decide({ subject: machineSubject(client.id) });
    if (!admitted.admitted) {
      throw new UnauthorizedClient(
        `the access policy does not admit ${machineSubject(client.id)}: the operator adds it to ALLOWED_USERS (or client:* for every machine client).`,
      );
    }
    const resource = p.resource ?? resolveResource(undefined, protectedResources(t.config));
    const now = dateOf(t.clock);
    const { response } = await t.db.$transaction(async (tx) => {
      const grant = await tx.grant.create({
        data: {
          id: randomUUID(),
          clientId: client.id,
          kind: "client_credentials",
          subject: machineSubject(client.id),
          resource,
          scope,
          ...initialDeadlines(t.config, now),
        },
      });
      const issued = await issueTokens(t, tx, grant, scope, resource, now, { refresh: null });
      await audit(tx, { type: "token.issued", clientId: client.id, grantId: grant.id, subject: grant.subject, detail: { grantType: "client_credentials" } });
      return issued;
    });
    return response;
  };
}
