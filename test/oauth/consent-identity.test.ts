// Who the consent page says is asking. A client nobody checked can call itself anything: a Client
// ID Metadata Document on a host not in CIMD_TRUSTED_HOSTS, or a dynamic registration, named
// "Claude" and sending the code to evil.example must not get "Claude wants to connect". The page
// leads with who vouches for it (the document's host; else the host of the redirect URI, or "an
// app on this computer" for a loopback or app-scheme redirect) and shows the name as a claim. A
// client the operator registered, or a document on a trusted host, keeps its name in the lead.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorizeUrl, openConsent, registerOperatorClient, registerTestClient } from "../support/oauth-client.ts";
import { DOCUMENT_HOST, startDocumentServer, TRUSTED_HOST, type DocumentServer } from "../support/document-server.ts";

let docs: DocumentServer;
let t: TestBroker;
beforeAll(async () => {
  docs = await startDocumentServer();
  t = await startBroker(
    { TRUST_PROXY: "true", CIMD_ALLOW_PRIVATE_NETWORKS: "true", CIMD_TRUSTED_HOSTS: TRUSTED_HOST, RESOURCE_NAME: "Team docs" },
    { documentFetch: { lookup: docs.lookup(), ca: docs.caCert } },
  );
});
afterAll(async () => {
  await t.stop();
  await docs.close();
});

/** A metadata document published at `path` on `host` (the document server's port). */
function publish(host: string, path: string, metadata: Record<string, unknown>): string {
  const clientId = `https://${host}:${docs.port}${path}`;
  docs.json(path, { client_id: clientId, redirect_uris: ["https://evil.example/cb"], token_endpoint_auth_method: "none", ...metadata });
  return clientId;
}

const consentOf = async (clientId: string, redirectUri: string) =>
  (await openConsent(authorizeUrl(t.url, { client_id: clientId, redirect_uri: redirectUri }))).html;
const heading = (html: string) => /<h1>([\s\S]*?)<\/h1>/.exec(html)![1]!.replace(/<[^>]+>/g, "");
const title = (html: string) => /<title>([^<]*)<\/title>/.exec(html)![1]!;
const question = (html: string) => /<p class="question">([\s\S]*?)<\/p>/.exec(html)![1]!.replace(/<[^>]+>/g, "");

describe("an unverified client named Claude", () => {
  it("described by a host nobody trusts: the page leads with that host, the name is a claim", async () => {
    const clientId = publish(DOCUMENT_HOST, "/claude/client.json", { client_name: "Claude" });
    const html = await consentOf(clientId, "https://evil.example/cb");
    const host = `${DOCUMENT_HOST}:${docs.port}`;
    expect(heading(html)).toBe(`${host} wants to connect to Team docs`);
    expect(title(html)).toBe(`${host} wants to connect to Team docs`);
    expect(html).toContain('<span id="name-claim">It calls itself “<span id="client-name">Claude</span>”</span> and will return to');
    expect(question(html)).toBe(`Allow ${host} to connect?`);
    expect(html).not.toContain("Claude wants to connect");
    expect(html).not.toContain("Allow <strong>Claude</strong>");
    expect(html).toMatch(/<strong id="redirect-host">evil\.example<\/strong>/);
    expect(html).toContain('id="unverified"');
  });

  it("registered dynamically with a redirect to evil.example: the page leads with evil.example", async () => {
    const client = await registerTestClient(t.url, { client_name: "Claude", redirect_uris: ["https://evil.example/cb"] });
    const html = await consentOf(client.client_id, "https://evil.example/cb");
    expect(heading(html)).toBe("evil.example wants to connect to Team docs");
    expect(html).toContain('It calls itself “<span id="client-name">Claude</span>”</span>');
    expect(question(html)).toBe("Allow evil.example to connect?");
    expect(html).toMatch(/registered itself/);
    expect(html).toMatch(/id="client-initial" aria-hidden="true">E</);
  });

  it("registered dynamically with a loopback redirect (a native app): an app on this computer", async () => {
    const client = await registerTestClient(t.url, { client_name: "Claude Code", redirect_uris: ["http://127.0.0.1:7777/callback"] });
    const html = await consentOf(client.client_id, "http://127.0.0.1:7777/callback");
    expect(heading(html)).toBe("An app on this computer wants to connect to Team docs");
    expect(html).toContain('It calls itself “<span id="client-name">Claude Code</span>”</span>');
    expect(question(html)).toBe("Allow this app to connect?");
  });

  it("registered dynamically with an app scheme: an app on this computer", async () => {
    const client = await registerTestClient(t.url, { client_name: "Cursor", redirect_uris: ["cursor://anysphere.cursor-mcp/oauth/callback"] });
    const html = await consentOf(client.client_id, "cursor://anysphere.cursor-mcp/oauth/callback");
    expect(heading(html)).toBe("An app on this computer wants to connect to Team docs");
    expect(html).toContain('It calls itself “<span id="client-name">Cursor</span>”</span> and returns to the app that opens');
  });

  it("without a name, or with markup in it: said so, escaped", async () => {
    const plain = await registerTestClient(t.url, { client_name: undefined, redirect_uris: ["https://evil.example/cb"] });
    expect(await consentOf(plain.client_id, "https://evil.example/cb")).toContain('<span id="name-claim">It gives no name</span> and will return to');
    const marked = await registerTestClient(t.url, { client_name: "<b>Claude</b>", redirect_uris: ["https://evil.example/cb"] });
    const html = await consentOf(marked.client_id, "https://evil.example/cb");
    expect(html).toContain('It calls itself “<span id="client-name">&lt;b&gt;Claude&lt;/b&gt;</span>”</span>');
  });
});

describe("a verified client", () => {
  it("described by a host in CIMD_TRUSTED_HOSTS keeps its name in the lead", async () => {
    const clientId = publish(TRUSTED_HOST, "/trusted/client.json", { client_name: "Claude", redirect_uris: ["https://claude.example/cb"] });
    const html = await consentOf(clientId, "https://claude.example/cb");
    expect(heading(html)).toBe("Claude wants to connect to Team docs");
    expect(question(html)).toBe("Allow Claude to connect?");
    expect(html).not.toContain('id="name-claim"');
    expect(html).toContain('id="verified"');
  });

  it("registered by the operator keeps its name in the lead", async () => {
    const client = await registerOperatorClient(t.broker.database.db, {
      client_name: "Ops tool",
      redirect_uris: ["https://ops.example.com/cb"],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
      response_types: ["code"],
    });
    const html = await consentOf(client.client_id, "https://ops.example.com/cb");
    expect(heading(html)).toBe("Ops tool wants to connect to Team docs");
    expect(html).not.toContain('id="name-claim"');
    expect(html).not.toMatch(/Unverified/);
  });
});
