// The MCP TypeScript SDK client in its Client ID Metadata Document mode (SEP-991: it uses its
// `clientMetadataUrl` as client_id when the server advertises client_id_metadata_document_supported),
// end to end through Chromium, against the broker as a real process: `npm start`'s command, with
// the test's throwaway CA given through NODE_EXTRA_CA_CERTS, as an operator would for an intranet.
// The document is served over https by the test on 127.0.0.1 (CIMD_ALLOW_PRIVATE_NETWORKS=true).
import { expect, it } from "@jest/globals";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { authorizeInBrowser, describeWithChromium, newUser, useChromium } from "../support/browser.ts";
import { CallbackServer, connectWithOAuth, TestOAuthProvider } from "../support/mcp-oauth-client.ts";
import { startDocumentServer } from "../support/document-server.ts";
import { startBrokerProcess } from "../support/broker-process.ts";

const chromium = useChromium();

/** What an MCP client application that publishes a metadata document gives the SDK. */
class MetadataDocumentProvider extends TestOAuthProvider {
  constructor(
    callbackUrl: string,
    authorize: (url: URL) => Promise<void>,
    readonly clientMetadataUrl: string,
  ) {
    super(callbackUrl, authorize, "SDK CIMD client");
  }
}

describeWithChromium("the MCP SDK client with a Client ID Metadata Document", () => {
  it("connects with an https client_id: discovery, consent naming the host, login, tokens, a tool call", async () => {
    const docs = await startDocumentServer();
    chromium.cleanup(() => docs.close());
    const callback = await new CallbackServer().start();
    chromium.cleanup(() => callback.close());
    const dir = mkdtempSync(path.join(tmpdir(), "mab-cimd-e2e-"));
    chromium.cleanup(async () => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(path.join(dir, "test-ca.pem"), docs.caCert);
    const broker = await startBrokerProcess(dir, { NODE_EXTRA_CA_CERTS: path.join(dir, "test-ca.pem"), CIMD_ALLOW_PRIVATE_NETWORKS: "true" });
    chromium.cleanup(() => broker.kill());

    const clientId = `https://127.0.0.1:${docs.port}/sdk/client.json`;
    docs.json(
      "/sdk/client.json",
      {
        client_id: clientId,
        client_name: "SDK CIMD client",
        redirect_uris: [callback.url],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      },
      { "cache-control": "max-age=300" },
    );

    const context = await newUser(chromium.browser);
    try {
      const consentTexts: string[] = [];
      const { authorize } = authorizeInBrowser(context, {
        user: "dana",
        redirectUri: callback.url,
        inspect: async (page, kind) => {
          if (kind === "consent") consentTexts.push((await page.locator("#vouched-by").textContent()) ?? "");
        },
      });
      const provider = new MetadataDocumentProvider(callback.url, authorize, clientId);
      const connected = await connectWithOAuth(`${broker.url}/mcp`, callback, authorize, provider);
      try {
        // The SDK used the URL as client_id: no registration happened.
        expect(provider.clientInfo?.client_id).toBe(clientId);
        expect(provider.authorizationUrls[0]?.searchParams.get("client_id")).toBe(clientId);
        expect(consentTexts).toHaveLength(1);
        expect(consentTexts[0]).toContain(`127.0.0.1:${docs.port}`);
        expect(consentTexts[0]).toContain("Unverified");
        const result = (await connected.client.callTool({ name: "whoami", arguments: {} })) as { content: Array<{ text: string }> };
        expect(JSON.parse(result.content[0]!.text)).toMatchObject({ subject: "demo:dana" });
        expect(docs.requests).toContain("GET /sdk/client.json");
      } finally {
        await connected.transport.terminateSession().catch(() => undefined);
        await connected.client.close();
      }
    } finally {
      await context.close();
    }
  }, 90_000);
});
