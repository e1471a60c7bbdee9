// `clients list|add|show|remove`: the operator's registry of MCP clients. `add` is the manual
// registration of spec §5.3 for clients that cannot register themselves (or when
// DYNAMIC_REGISTRATION=false); it prints the client secret once, or registers the client's public
// keys instead (--jwks-uri, --jwks-file: private_key_jwt, no secret at all).
import { readFileSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { withContext } from "./context.ts";
import { CliError, jsonCommand, iso, printFields, printJson, printTable } from "./output.ts";
import type { CliIo } from "./io.ts";
import { parseClientMetadata, registrationPolicyOf, type ClientMetadata } from "../grants/client-metadata.ts";
import { cliConfig } from "./context.ts";
import { DomainError } from "../grants/errors.ts";
import type { RegisteredClient } from "../grants/types.ts";
import { firstLine } from "../lib/error-text.ts";

/** How a client came to be: a metadata-document client also says who publishes its document. */
function registrationOf(client: RegisteredClient): string {
  const doc = client.metadataDocument;
  return doc ? `cimd (${doc.host}${doc.verified ? ", verified" : ""})` : client.registrationType;
}

/** Where a private_key_jwt client's keys are: its published set, or the one registered with it. */
function keysOf(client: RegisteredClient): string | undefined {
  if (client.jwksUri) return client.jwksUri;
  if (client.jwks) return `registered key set (${client.jwks.keys.length} key${client.jwks.keys.length === 1 ? "" : "s"})`;
  return undefined;
}

function describe(client: RegisteredClient): Record<string, string> {
  const keys = keysOf(client);
  return {
    id: client.id,
    name: client.clientName ?? "-",
    type: client.tokenEndpointAuthMethod === "none" ? "public" : "confidential",
    "auth method": client.fallbackAuthMethod ? `${client.tokenEndpointAuthMethod} (or ${client.fallbackAuthMethod})` : client.tokenEndpointAuthMethod,
    ...(keys ? { keys } : {}),
    "application type": client.applicationType ?? "-",
    "grant types": client.grantTypes.join(" "),
    "redirect uris": client.redirectUris.join(" ") || "-",
    registered: `${registrationOf(client)} at ${iso(client.createdAt)}`,
    "last used": iso(client.lastUsedAt),
  };
}

/** A client in --json output: camelCase keys, like every --json output of the CLI. */
function clientJson(client: RegisteredClient): Record<string, unknown> {
  return {
    clientId: client.id,
    clientName: client.clientName,
    type: client.tokenEndpointAuthMethod === "none" ? "public" : "confidential",
    tokenEndpointAuthMethod: client.tokenEndpointAuthMethod,
    fallbackAuthMethod: client.fallbackAuthMethod,
    jwksUri: client.jwksUri,
    jwks: client.jwks,
    signingAlg: client.signingAlg,
    applicationType: client.applicationType,
    grantTypes: client.grantTypes,
    responseTypes: client.responseTypes,
    redirectUris: client.redirectUris,
    scope: client.scope,
    clientUri: client.clientUri,
    logoUri: client.logoUri,
    softwareId: client.softwareId,
    softwareVersion: client.softwareVersion,
    registrationType: client.registrationType,
    metadataDocument: client.metadataDocument ?? null,
    createdAt: client.createdAt.toISOString(),
    lastUsedAt: client.lastUsedAt?.toISOString() ?? null,
  };
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** --jwks-uri or --jwks-file as registration metadata (jwks_uri or jwks); undefined when neither is given. */
function keyOptions(io: CliIo, opts: { jwksUri?: string; jwksFile?: string }): { jwks_uri: string } | { jwks: unknown } | undefined {
  if (opts.jwksUri !== undefined && opts.jwksFile !== undefined) throw new CliError("invalid client: give --jwks-uri or --jwks-file, not both.", 2);
  if (opts.jwksUri !== undefined) return { jwks_uri: opts.jwksUri };
  if (opts.jwksFile === undefined) return undefined;
  const file = path.resolve(io.cwd, opts.jwksFile);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`cannot read --jwks-file ${file}: ${(err as NodeJS.ErrnoException).code ?? firstLine(err)}`, 2);
  }
  try {
    return { jwks: JSON.parse(text) as unknown };
  } catch {
    throw new CliError(`--jwks-file ${file} is not JSON: it must hold a JWK Set ({"keys": [...]}) with the client's public keys.`, 2);
  }
}

/** The options of `clients add`, as commander hands them over. */
interface AddOptions {
  name: string;
  redirectUri: string[];
  public?: boolean;
  authMethod?: string;
  grantType: string[];
  clientUri?: string;
  logoUri?: string;
  jwksUri?: string;
  jwksFile?: string;
  json?: boolean;
}

/** The registration metadata `clients add` asks for, checked by the same rules as a self-registration. */
function manualMetadata(io: CliIo, opts: AddOptions): ClientMetadata {
  const grantTypes = opts.grantType.length ? opts.grantType : ["authorization_code", "refresh_token"];
  const keys = keyOptions(io, opts);
  if (keys && opts.public)
    throw new CliError("invalid client: --public and --jwks-uri/--jwks-file exclude each other (a client with keys is confidential).", 2);
  // Said in the options' words, before the registration rules speak of redirect_uris.
  if (grantTypes.includes("authorization_code") && opts.redirectUri.length === 0)
    throw new CliError(
      "clients add needs --redirect-uri <uri>: where the client receives its authorization code (repeat for several); for a machine client without a user, use --grant-type client_credentials instead",
      2,
    );
  try {
    return parseClientMetadata(
      {
        client_name: opts.name,
        redirect_uris: opts.redirectUri,
        token_endpoint_auth_method: opts.public ? "none" : (opts.authMethod ?? (keys ? "private_key_jwt" : "client_secret_basic")),
        ...keys,
        grant_types: grantTypes,
        response_types: grantTypes.includes("authorization_code") ? ["code"] : [],
        ...(opts.clientUri ? { client_uri: opts.clientUri } : {}),
        ...(opts.logoUri ? { logo_uri: opts.logoUri } : {}),
      },
      "manual",
      registrationPolicyOf(cliConfig(io).clients),
    );
  } catch (err) {
    if (err instanceof DomainError) throw new CliError(`invalid client: ${err.description}`, 2);
    throw err;
  }
}

function listCommand(clients: Command, io: CliIo): void {
  jsonCommand(clients, "list", "list registered clients").action(async (opts: { json?: boolean }) => {
    await withContext(io, async ({ services }) => {
      const list = await services.clients.list();
      if (opts.json) return printJson(io, list.map(clientJson));
      printTable(
        io,
        list.map((c) => ({
          id: c.id,
          name: c.clientName ?? "-",
          type: c.tokenEndpointAuthMethod === "none" ? "public" : "confidential",
          registered: registrationOf(c),
          app: c.applicationType ?? "-",
          lastUsed: iso(c.lastUsedAt),
        })),
        "No clients registered.",
      );
    });
  });
}

function addCommand(clients: Command, io: CliIo): void {
  jsonCommand(clients, "add", "register a client by hand; prints its secret once")
    .requiredOption("--name <name>", "the name shown on the consent page")
    .option("--redirect-uri <uri>", "an allowed redirect URI (repeat for several)", collect, [])
    .option("--public", "a public client (no secret; PKCE only), like most MCP clients")
    .option("--auth-method <method>", "client_secret_basic (default for confidential clients), client_secret_post or private_key_jwt")
    .option("--jwks-uri <url>", "private_key_jwt: the https URL where the client publishes its public keys (a JWK Set); no secret is made")
    .option("--jwks-file <file>", "private_key_jwt: a file holding the client's public keys (a JWK Set, JSON); no secret is made")
    .option(
      "--grant-type <type>",
      "authorization_code, refresh_token, client_credentials or urn:ietf:params:oauth:grant-type:token-exchange (repeat; default authorization_code + refresh_token); client_credentials makes a machine client that reaches the MCP server as client:<id>, without a user; token-exchange makes an MCP server that fetches its users' connected-account tokens (name it in the server's exchangeClients)",
      collect,
      [],
    )
    .option("--client-uri <url>", "the application's website (https)")
    .option("--logo-uri <url>", "the application's logo (https)")
    .action(async (opts: AddOptions) => {
      const metadata = manualMetadata(io, opts);
      await withContext(io, async ({ services }) => {
        const { client, clientSecret } = await services.clients.register(metadata, "manual");
        if (opts.json) return printJson(io, { ...clientJson(client), clientSecret: clientSecret ?? null });
        printFields(io, { ...describe(client), ...(clientSecret ? { secret: clientSecret } : {}) });
        if (clientSecret) io.out("\nStore the secret now: it is shown only this once.\n");
      });
    });
}

function showCommand(clients: Command, io: CliIo): void {
  jsonCommand(clients, "show", "show one client")
    .argument("<id>", "client id")
    .action(async (id: string, opts: { json?: boolean }) => {
      await withContext(io, async ({ services }) => {
        const client = await services.clients.get(id);
        if (!client) throw new CliError(`no client with id ${id}`);
        const live = (await services.grantListing.listGrants({ client: id })).length;
        if (opts.json) return printJson(io, { ...clientJson(client), liveGrants: live });
        printFields(io, { ...describe(client), "live grants": String(live) });
      });
    });
}

function removeCommand(clients: Command, io: CliIo): void {
  jsonCommand(clients, "remove", "remove a client; its grants and tokens stop working at once")
    .argument("<id>", "client id")
    .action(async (id: string, opts: { json?: boolean }) => {
      await withContext(io, async ({ services }) => {
        if (!(await services.clients.get(id))) throw new CliError(`no client with id ${id}`);
        // Revoke first so upstream tokens are released, then remove the rows. Expired grants are
        // revoked too: their upstream sessions may still hold tokens.
        const unrevoked = (await services.grantListing.listGrants({ client: id, all: true })).filter((g) => g.revokedAt === null);
        const revoked = await services.grants.lifecycle.revokeGrants(
          unrevoked.map((g) => g.id),
          "client_removed",
        );
        await services.clients.remove(id);
        if (opts.json) return printJson(io, { removed: id, revokedGrants: revoked.length });
        io.out(`Removed client ${id} (${revoked.length} grant(s) revoked).\n`);
      });
    });
}

export function registerClientCommands(program: Command, io: CliIo): void {
  const clients = program.command("clients").description("list, add, show and remove registered MCP clients");
  listCommand(clients, io);
  addCommand(clients, io);
  showCommand(clients, io);
  removeCommand(clients, io);
}
