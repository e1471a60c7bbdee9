// Redirect URIs an attack trial got registered, over real HTTP: the same rule at /register, in a
// Client ID Metadata Document, and at /authorize (where a registration stored under an older, looser
// rule is held to the new one). Loopback only as 127.0.0.1, [::1] or localhost as written (the URL
// parser forgives 0x7f000001, 2130706433, 0177.0.0.1, 127.1 and 127.0.0.1.), never a user name before
// the host, and app schemes only in RFC 8252 §7.1 shapes: never a browser's own scheme, never a
// wrapper around another URL. Every refusal is a 400 that says why, never a 500.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { ClientRegistry } from "../../src/grants/clients.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { authorizeUrl, countRows, freshIp, postJson } from "../support/oauth-client.ts";
import { startDocumentServer, type DocumentServer } from "../support/document-server.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";

/** Loopback spellings and user names the trial registered. */
const LOOPBACK_TRICKS = [
  "http://evil.com@127.0.0.1/cb",
  "http://user:pw@127.0.0.1/cb",
  "http://0x7f000001/cb",
  "http://2130706433/cb",
  "http://0177.0.0.1/cb",
  "http://127.1/cb",
  "http://127.0.0.1./cb",
];

/** App schemes the trial registered under the old deny-list. */
const APP_SCHEME_TRICKS = [
  "microsoft-edge:https://evil.example/cb",
  "googlechrome://evil.example/cb",
  "firefox:https://evil.example/cb",
  "x-safari-https://evil.example/cb",
  "jar:file:///tmp/evil.jar!/cb",
  "ms-settings:privacy",
  "x-javascript:alert(1)",
  "cursor:cb",
];

let docs: DocumentServer;
let t: TestBroker;
beforeAll(async () => {
  docs = await startDocumentServer();
  t = await startBroker({ TRUST_PROXY: "true", CIMD_ALLOW_PRIVATE_NETWORKS: "true" }, { documentFetch: { lookup: docs.lookup(), ca: docs.caCert } });
});
afterAll(async () => {
  await t.stop();
  await docs.close();
});

const register = (body: unknown) => postJson(`${t.url}/register`, body, { "x-forwarded-for": freshIp() });

describe("/register", () => {
  it.each([...LOOPBACK_TRICKS, ...APP_SCHEME_TRICKS])("refuses %j with invalid_redirect_uri, storing nothing", async (uri) => {
    const before = await countRows(t.broker.database.db);
    const res = await register({ redirect_uris: [uri], token_endpoint_auth_method: "none", client_name: "trial" });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: "invalid_redirect_uri" });
    expect(res.json!.error_description).toContain(JSON.stringify(uri));
    expect(await countRows(t.broker.database.db)).toEqual(before);
  });

  it("says what is wrong with each kind", async () => {
    const why = async (uri: string) => (await register({ redirect_uris: [uri], token_endpoint_auth_method: "none" })).json!.error_description as string;
    expect(await why("http://evil.com@127.0.0.1/cb")).toContain("must not contain a user name or password");
    expect(await why("http://0x7f000001/cb")).toContain("written exactly 127.0.0.1, [::1] or localhost");
    expect(await why("microsoft-edge:https://evil.example/cb")).toContain("a web browser's own");
    expect(await why("ms-settings:privacy")).toContain("neither a reverse domain name");
    expect(await why("com.example.app:/https://evil.example/cb")).toContain("wraps another URL");
  });
});

describe("a Client ID Metadata Document", () => {
  it.each(LOOPBACK_TRICKS)("naming %j is refused with a page, and no client is recorded", async (uri) => {
    const path = `/tricks/${Math.random().toString(36).slice(2)}.json`;
    const clientId = `${docs.origin}${path}`;
    docs.json(path, {
      client_id: clientId,
      client_name: "Trial",
      redirect_uris: [uri],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    const res = await new HttpBrowser().request(authorizeUrl(t.url, { client_id: clientId, redirect_uri: uri }).href);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    const html = await res.text();
    expect(html).toContain("This application could not be identified");
    expect(html).toContain("redirect_uris");
    expect(await t.broker.database.db.client.findUnique({ where: { id: clientId } })).toBeNull();
  });
});

describe("/authorize", () => {
  it.each([...LOOPBACK_TRICKS, "microsoft-edge:https://evil.example/cb", "x-safari-https://evil.example/cb"])(
    "does not send a code to %j even when an older rule stored it",
    async (uri) => {
      // The row an old registration left: the metadata of a public client, with the URI as it was stored.
      const metadata = {
        ...parseClientMetadata({ redirect_uris: ["http://127.0.0.1/cb"], token_endpoint_auth_method: "none" }, "dynamic"),
        redirectUris: [uri],
      };
      const { client } = await new ClientRegistry(t.broker.database.db).register(metadata, "dynamic");
      const res = await new HttpBrowser().request(authorizeUrl(t.url, { client_id: client.id, redirect_uri: uri }).href);
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain("Unregistered redirect address");
    },
  );
});
