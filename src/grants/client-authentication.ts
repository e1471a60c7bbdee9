// Client authentication at the token, revocation and introspection endpoints: one entry point for
// every method a client may have registered (RFC 6749 §2.3, RFC 7591 token_endpoint_auth_method):
// none (a public client: PKCE does the proving), client_secret_basic, client_secret_post, and
// private_key_jwt (RFC 7523 §2.2, client-assertion.ts). The HTTP edge (http/client-auth.ts) only
// reads the credentials off the request; everything decided about them is decided here, and every
// failure is an InvalidClient.
import type { Logger } from "../logger.ts";
import { boundedCache } from "../lib/bounded-cache.ts";
import { assertionClientId, CLIENT_ASSERTION_TYPE, type ClientAssertions } from "./client-assertion.ts";
import type { ClientRegistry, KnownClient } from "./clients.ts";
import { InvalidClient } from "./errors.ts";
import type { PresentedClient } from "./ports.ts";
import type { RegisteredClient, TokenEndpointAuthMethod } from "./types.ts";

/** What a request carries to say which client it is from, as the HTTP edge read it. */
export interface ClientCredentials {
  /** The client_id parameter. */
  readonly clientId?: string | undefined;
  /** HTTP Basic credentials (client_secret_basic), decoded. */
  readonly basic?: { readonly id: string; readonly secret: string } | undefined;
  /** The client_secret parameter (client_secret_post). */
  readonly clientSecret?: string | undefined;
  /** client_assertion_type and client_assertion (private_key_jwt). */
  readonly clientAssertionType?: string | undefined;
  readonly clientAssertion?: string | undefined;
}

/** Who sent the request, for the log: a burst of wrong secrets for one client is worth a warning. */
export interface RequestOrigin {
  readonly ip: string;
  readonly log: Logger;
}

export type ClientEndpoint = "token" | "revocation" | "introspection";

/** A client whose credentials held, and the method they held by (introspection wants a confidential one). */
export type AuthenticatedClient = RegisteredClient & { readonly authenticatedBy: TokenEndpointAuthMethod };

/** This many failed secrets for one client within the window are worth a warning (once per window). */
const BURST = 5;
const BURST_WINDOW_MS = 60_000;

export class ClientAuthentication {
  private readonly failedSecrets = boundedCache<string, { count: number }>(10_000, { ttl: BURST_WINDOW_MS });

  constructor(
    private readonly clients: ClientRegistry,
    private readonly assertions: ClientAssertions,
    /** The URL of each endpoint, as the metadata advertises it: an assertion's aud may name the one it is sent to. */
    private readonly endpoints: Readonly<Record<ClientEndpoint, string>>,
  ) {}

  /**
   * The client a request names, its credentials checked for form (one method, never two); its
   * `authenticate` then checks them against the client's row, wherever that row was read (a refresh
   * reads it with the token).
   */
  present(credentials: ClientCredentials, endpoint: ClientEndpoint, origin: RequestOrigin): PresentedClient {
    const { basic, clientSecret, clientAssertion, clientAssertionType } = credentials;
    const asserted = clientAssertion !== undefined || clientAssertionType !== undefined;
    if ((basic ? 1 : 0) + (clientSecret !== undefined ? 1 : 0) + (asserted ? 1 : 0) > 1)
      throw new InvalidClient("Use one client authentication method, not several.");
    if (asserted) {
      if (clientAssertionType !== CLIENT_ASSERTION_TYPE)
        throw new InvalidClient(`client_assertion_type must be ${CLIENT_ASSERTION_TYPE} (RFC 7523 §2.2), sent together with client_assertion.`);
      if (!clientAssertion) throw new InvalidClient("client_assertion is missing: client_assertion_type came without it.");
    }
    if (basic && credentials.clientId !== undefined && credentials.clientId !== basic.id)
      throw new InvalidClient("client_id does not match the authenticated client.");
    // RFC 7523 §3: with an assertion the client_id may be left out; the assertion's sub names it.
    const clientId = basic?.id ?? credentials.clientId ?? (clientAssertion ? assertionClientId(clientAssertion) : undefined);
    if (!clientId) throw new InvalidClient("Client authentication is required: client_id is missing.");
    const method: TokenEndpointAuthMethod = basic
      ? "client_secret_basic"
      : clientSecret !== undefined
        ? "client_secret_post"
        : asserted
          ? "private_key_jwt"
          : "none";
    return {
      clientId,
      authenticate: async (found) => {
        const known = this.allowed(found, method);
        const { client } = known;
        if (method === "client_secret_basic" || method === "client_secret_post") {
          if (!known.secretMatches(basic?.secret ?? clientSecret ?? "")) {
            this.noteFailedSecret(origin, client.id);
            throw new InvalidClient("Client authentication failed.");
          }
        } else if (method === "private_key_jwt") await this.assertions.verify(client, clientAssertion!, this.endpoints[endpoint]);
        this.clients.touch(client.id);
        return { ...client, authenticatedBy: method };
      },
    };
  }

  /** The client of a request, authenticated against its row (the revocation and introspection endpoints). */
  async authenticate(credentials: ClientCredentials, endpoint: ClientEndpoint, origin: RequestOrigin): Promise<AuthenticatedClient> {
    const presented = this.present(credentials, endpoint, origin);
    return (await presented.authenticate(await this.clients.find(presented.clientId))) as AuthenticatedClient;
  }

  /** The client, when it exists and may authenticate by `method`. */
  private allowed(known: KnownClient | null, method: TokenEndpointAuthMethod): KnownClient {
    if (!known) throw new InvalidClient("Unknown client.");
    const { client } = known;
    if (method === client.tokenEndpointAuthMethod || method === client.fallbackAuthMethod) return known;
    if (client.tokenEndpointAuthMethod === "private_key_jwt")
      throw new InvalidClient(`This client authenticates with private_key_jwt: send a client_assertion signed with its key (RFC 7523 §2.2), not ${method}.`);
    throw new InvalidClient(`This client authenticates with ${client.tokenEndpointAuthMethod}, not ${method}.`);
  }

  /** Counts a wrong secret; the BURST-th within the window from the first one is logged at warn. */
  private noteFailedSecret(origin: RequestOrigin, clientId: string): void {
    const entry = this.failedSecrets.get(clientId) ?? { count: 0 };
    entry.count++;
    // The window runs from the first failure: later ones do not extend it.
    this.failedSecrets.set(clientId, entry, { noUpdateTTL: entry.count > 1 });
    if (entry.count === BURST)
      origin.log.warn(
        { clientId, failures: BURST, windowSeconds: BURST_WINDOW_MS / 1000, ip: origin.ip },
        "security: repeated failed client authentication; someone may be guessing this client's secret",
      );
  }
}
