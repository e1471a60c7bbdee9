// Client authentication at the token, revocation and introspection endpoints, by the method the
// client registered (RFC 6749 §2.3, RFC 7591 token_endpoint_auth_method). Failures are
// invalid_client, 401 with a Basic challenge.
import type Koa from "koa";
import { LRUCache } from "lru-cache";
import { OAuthError } from "./errors.ts";
import { CONTROL_CHARACTERS } from "./body.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { PresentedClient } from "../grants/ports.ts";
import type { RegisteredClient } from "../grants/types.ts";

function invalidClient(description: string): OAuthError {
  return new OAuthError("invalid_client", description, { status: 401, headers: { "WWW-Authenticate": 'Basic realm="mcp-auth-broker"' } });
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

/** This many failed secrets for one client within the window are worth a warning (once per window). */
const BURST = 5;
const BURST_WINDOW_MS = 60_000;
/** Per client registry, so that every broker in a process (tests, library use) counts its own. */
const failedSecrets = new WeakMap<ClientRegistry, LRUCache<string, { count: number }>>();

/** Counts a wrong secret; the BURST-th within the window from the first one is logged at warn. */
function noteFailedSecret(ctx: Koa.Context, clients: ClientRegistry, clientId: string): void {
  let window = failedSecrets.get(clients);
  if (!window) {
    window = new LRUCache({ max: 10_000, ttl: BURST_WINDOW_MS });
    failedSecrets.set(clients, window);
  }
  const entry = window.get(clientId) ?? { count: 0 };
  entry.count++;
  // The window runs from the first failure: later ones do not extend it.
  window.set(clientId, entry, { noUpdateTTL: entry.count > 1 });
  if (entry.count === BURST)
    ctx.state.log.warn(
      { clientId, failures: BURST, windowSeconds: BURST_WINDOW_MS / 1000, ip: ctx.ip },
      "security: repeated failed client authentication; someone may be guessing this client's secret",
    );
}

/**
 * The client a request names, with its credentials read and checked for form (HTTP Basic, or
 * client_id and client_secret in the body, never both); `authenticate` then checks them against
 * the client's row, wherever that row was read.
 */
export function presentedClient(ctx: Koa.Context, params: Record<string, string>, clients: ClientRegistry): PresentedClient {
  const header = ctx.get("authorization");
  const basic = header ? decodeBasic(header) : null;
  if (header && !basic) throw invalidClient("Malformed Authorization header: use HTTP Basic with the client id and secret.");
  if (basic && params.client_secret !== undefined) throw invalidClient("Use one client authentication method, not both.");
  if (basic && params.client_id !== undefined && params.client_id !== basic.id) throw invalidClient("client_id does not match the authenticated client.");
  const clientId = basic?.id ?? params.client_id;
  if (!clientId) throw invalidClient("Client authentication is required: client_id is missing.");
  if (basic && (CONTROL_CHARACTERS.test(basic.id) || CONTROL_CHARACTERS.test(basic.secret)))
    throw invalidClient("Malformed Authorization header: the client id or secret contains control characters.");
  const method = basic ? "client_secret_basic" : params.client_secret !== undefined ? "client_secret_post" : "none";
  return {
    clientId,
    authenticate(known) {
      if (!known) throw invalidClient("Unknown client.");
      const { client } = known;
      if (method !== client.tokenEndpointAuthMethod) {
        throw invalidClient(`This client authenticates with ${client.tokenEndpointAuthMethod}, not ${method}.`);
      }
      if (method !== "none" && !known.secretMatches(basic?.secret ?? params.client_secret ?? "")) {
        noteFailedSecret(ctx, clients, client.id);
        throw invalidClient("Client authentication failed.");
      }
      clients.touch(client.id);
      return client;
    },
  };
}

/** The client of a request, authenticated against its row (the revocation and introspection endpoints). */
export async function authenticateClient(ctx: Koa.Context, params: Record<string, string>, clients: ClientRegistry): Promise<RegisteredClient> {
  const presented = presentedClient(ctx, params, clients);
  return presented.authenticate(await clients.find(presented.clientId));
}
