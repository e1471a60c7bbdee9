// The configuration file's connections and each server's `connection` as the values the broker
// works with (connections.ts): defaults filled in (titles, GitHub's URLs, the HTTP header).
import type { ConnectionInput, ServerInput } from "./catalogue-schema.ts";
import { DEFAULT_HEADER_INJECT, defaultConnectionTitle, type ConnectionConfig, type ConnectionProviderConfig, type ServerConnection } from "./connections.ts";

function providerOf(input: ConnectionInput): ConnectionProviderConfig {
  switch (input.provider) {
    case "github": {
      const githubUrl = (input.url ?? "https://github.com").replace(/\/+$/, "");
      // GitHub Enterprise Server answers its API below /api/v3 of its own host.
      const apiUrl = input.apiUrl ?? (githubUrl === "https://github.com" ? "https://api.github.com" : `${githubUrl}/api/v3`);
      return { kind: "github", githubUrl, apiUrl: apiUrl.replace(/\/+$/, "") };
    }
    case "google":
      return { kind: "google", issuer: "https://accounts.google.com" };
    case "oidc":
      return { kind: "oidc", issuer: input.issuer };
    case "oauth2":
      return {
        kind: "oauth2",
        authorizeUrl: input.authorizeUrl,
        tokenUrl: input.tokenUrl,
        revokeUrl: input.revokeUrl,
        userinfoUrl: input.userinfoUrl,
        tokenAuth: input.tokenAuth ?? "client_secret_basic",
        subjectField: input.subjectField,
        loginField: input.loginField,
        authorizeParams: Object.freeze({ ...input.authorizeParams }),
      };
  }
}

export function connectionsOf(written: Readonly<Record<string, ConnectionInput>> | undefined): readonly ConnectionConfig[] {
  return Object.freeze(
    Object.entries(written ?? {}).map(([name, input]) => {
      const provider = providerOf(input);
      return Object.freeze({
        name,
        title: input.title ?? defaultConnectionTitle(name, provider),
        provider: Object.freeze(provider),
        clientId: input.clientId,
        clientSecret: input.clientSecret,
        scopes: Object.freeze([...(input.scopes ?? [])]),
      });
    }),
  );
}

/** Authorization carries a scheme; a header of its own, the token alone. */
const defaultFormat = (header: string): string => (header.toLowerCase() === "authorization" ? "Bearer {token}" : "{token}");

/** The connection a server names and how its token reaches it; undefined when it names none. */
export function serverConnection(server: ServerInput): ServerConnection | undefined {
  if (server.connection === undefined) return undefined;
  const inject = server.connectionInject;
  if (inject && "env" in inject) return Object.freeze({ name: server.connection, inject: Object.freeze({ kind: "env", variable: inject.env }) });
  if (inject && "header" in inject)
    return Object.freeze({
      name: server.connection,
      inject: Object.freeze({ kind: "header", header: inject.header.toLowerCase(), format: inject.format ?? defaultFormat(inject.header) }),
    });
  return Object.freeze({ name: server.connection, inject: DEFAULT_HEADER_INJECT });
}
