// The HTTP edge of client authentication at the token, revocation and introspection endpoints:
// reads the credentials off the request (HTTP Basic, client_secret_post, client_assertion) and
// hands them to grants/client-authentication.ts, which decides. Failures are invalid_client, 401
// with a Basic challenge (RFC 6749 §5.2).
import type Koa from "koa";
import { OAuthError } from "./errors.ts";
import { CONTROL_CHARACTERS } from "./body.ts";
import type { AuthenticatedClient, ClientAuthentication, ClientCredentials, ClientEndpoint } from "../grants/client-authentication.ts";
import { DomainError } from "../grants/errors.ts";
import type { PresentedClient } from "../grants/ports.ts";

const CHALLENGE = { "WWW-Authenticate": 'Basic realm="mcp-auth-broker"' };

function invalidClient(description: string, cause?: unknown): OAuthError {
  return new OAuthError("invalid_client", description, { status: 401, headers: CHALLENGE, cause });
}

function decodeBasic(header: string): { id: string; secret: string } | null {
  const match = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(header);
  if (!match) return null;
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  const i = decoded.indexOf(":");
  if (i < 0) return null;
  try {
    // RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
    return { id: decodeURIComponent(decoded.slice(0, i).replace(/\+/g, " ")), secret: decodeURIComponent(decoded.slice(i + 1).replace(/\+/g, " ")) };
  } catch {
    return null;
  }
}

/** The credentials a request carries, checked for form only. */
function credentialsOf(ctx: Koa.Context, params: Record<string, string>): ClientCredentials {
  const header = ctx.get("authorization");
  const basic = header ? decodeBasic(header) : null;
  if (header && !basic) throw invalidClient("Malformed Authorization header: use HTTP Basic with the client id and secret.");
  if (basic && (CONTROL_CHARACTERS.test(basic.id) || CONTROL_CHARACTERS.test(basic.secret)))
    throw invalidClient("Malformed Authorization header: the client id or secret contains control characters.");
  return {
    clientId: params.client_id,
    basic: basic ?? undefined,
    clientSecret: params.client_secret,
    clientAssertionType: params.client_assertion_type,
    clientAssertion: params.client_assertion,
  };
}

const originOf = (ctx: Koa.Context) => ({ ip: ctx.ip, log: ctx.state.log });

/** The client a token request names, its credentials read (checked against its row by the grants). */
export function presentedClient(ctx: Koa.Context, params: Record<string, string>, auth: ClientAuthentication): PresentedClient {
  return auth.present(credentialsOf(ctx, params), "token", originOf(ctx));
}

/** The client of a request, authenticated (the revocation and introspection endpoints). */
export function authenticateClient(
  ctx: Koa.Context,
  params: Record<string, string>,
  auth: ClientAuthentication,
  endpoint: Exclude<ClientEndpoint, "token">,
): Promise<AuthenticatedClient> {
  return auth.authenticate(credentialsOf(ctx, params), endpoint, originOf(ctx));
}

/** Runs an endpoint's work, answering a failed client authentication with the challenge it needs. */
export async function challengingClients<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof DomainError && err.code === "invalid_client") throw invalidClient(err.description, err);
    throw err;
  }
}
