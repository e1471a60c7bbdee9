// End to end, per upstream kind: the real MCP SDK client does its real OAuth flow against the
// broker (discovery from the 401, dynamic registration, PKCE, resource) while headless Chromium
// clicks through consent and the upstream login; then the client uses the MCP server's tools
// and the identity the server saw is checked.
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import type { BrowserContext } from "playwright-core";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { authorizeInBrowser, describeWithChromium, newUser, useChromium, type ClickThroughResult } from "../support/browser.ts";
import { CallbackServer, connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startGitHubEmulator } from "../support/github-emulator.ts";
import { startDemoIdentityProvider } from "../../src/demo/identity-provider.ts";

interface Upstream {
  readonly broker: TestBroker;
  readonly login: "demo" | "github";
  readonly providerName: string;
  stop(): Promise<void>;
}

const UPSTREAMS: ReadonlyArray<{ kind: string; user: string; subject: string; start: () => Promise<Upstream> }> = [
  {
    kind: "demo",
    user: "alice",
    subject: "demo:alice",
    async start() {
      const broker = await startBroker();
      return { broker, login: "demo", providerName: "Demo identity provider", stop: () => broker.stop() };
    },
  },
  {
    kind: "oidc",
    user: "olivia",
    subject: "oidc:olivia",
    async start() {
      const idp = await startDemoIdentityProvider({ clients: [], cookieKeys: ["e2e"] });
      const broker = await startBroker({
        UPSTREAM_PROVIDER: "oidc",
        ALLOW_ANY_USER: "true",
        UPSTREAM_ISSUER: idp.url,
        UPSTREAM_CLIENT_ID: "broker",
        UPSTREAM_CLIENT_SECRET: "issuer-secret",
        UPSTREAM_DISPLAY_NAME: "Acme SSO",
      });
      // As an operator does in the IdP's console, once the broker's callback URL is known.
      await idp.addClient({ client_id: "broker", client_secret: "issuer-secret", redirect_uris: [`${broker.url}/oauth/callback`] });
      return {
        broker,
        login: "demo",
        providerName: "Acme SSO",
        stop: async () => {
          await broker.stop();
          await idp.close();
        },
      };
    },
  },
  {
    kind: "github",
    user: "octocat",
    subject: "github:583231",
    async start() {
      const gh = await startGitHubEmulator({ clientId: "Iv1.broker", clientSecret: "emulator-secret" });
      const broker = await startBroker({
        ...gh.brokerEnv(),
        ALLOW_ANY_USER: "true",
      });
      return {
        broker,
        login: "github",
        providerName: "GitHub",
        stop: async () => {
          await broker.stop();
          await gh.close();
        },
      };
    },
  },
];

function textOf(result: unknown): string {
  const parsed = CallToolResultSchema.parse(result);
  const first = parsed.content[0];
  if (first?.type !== "text") throw new Error(`expected text content, got ${JSON.stringify(parsed.content)}`);
  return first.text;
}

const chromium = useChromium();

for (const spec of UPSTREAMS) {
  describeWithChromium(`MCP SDK client + Chromium through the ${spec.kind} upstream`, () => {
    let upstream: Upstream;
    let callback: CallbackServer;
    let context: BrowserContext;
    let connected: ConnectedClient;
    let runs: ClickThroughResult[];

    beforeAll(async () => {
      [upstream, callback] = await Promise.all([spec.start(), new CallbackServer().start()]);
      chromium.cleanup(() => upstream.stop());
      context = await newUser(chromium.browser);
      // The connection every test below looks at, made once.
      const agent = authorizeInBrowser(context, { user: spec.user, decision: "Allow", upstream: upstream.login, name: `e2e-${spec.kind}` });
      runs = agent.runs;
      connected = await connectWithOAuth(`${upstream.broker.url}/mcp`, callback, agent.authorize);
    }, 30_000);
    afterAll(async () => {
      // A client that ends its session cleanly (DELETE) rather than cutting its streams.
      await connected?.transport.terminateSession().catch(() => undefined);
      await connected?.client.close();
      await context?.close();
      await callback?.close();
    });

    it(`connects: 401 → discovery → registration → consent → ${spec.kind} login → PKCE code exchange`, () => {
      expect(connected.provider.redirects).toBe(1);
      expect(runs[0]!.pages.map((p) => p.kind)).toEqual(["consent", upstream.login === "demo" ? "demo-login" : "github-login", "callback"]);
      // The SDK asked for this resource, with PKCE, as the client it registered.
      const asked = connected.provider.authorizationUrls[0]!;
      expect(asked.origin + asked.pathname).toBe(`${upstream.broker.url}/authorize`);
      expect(Object.fromEntries(asked.searchParams)).toMatchObject({
        response_type: "code",
        client_id: connected.provider.clientInfo!.client_id,
        code_challenge_method: "S256",
        resource: `${upstream.broker.url}/mcp`,
        redirect_uri: callback.url,
      });
      expect(connected.provider.savedTokens).toMatchObject({
        token_type: expect.stringMatching(/^bearer$/i),
        access_token: expect.any(String),
        refresh_token: expect.any(String),
      });
    });

    it("the consent page named the client, where it returns to, and the upstream provider", () => {
      const consent = runs[0]!.pages[0]!;
      // Self-registered with a loopback redirect: named by where its code goes, its name a claim.
      expect(consent.text).toContain("It calls itself “SDK e2e client”");
      expect(consent.text).toContain("Allow this app to connect?");
      expect(consent.text).toContain(new URL(callback.url).host);
      expect(consent.text).toContain(`sign in with ${upstream.providerName}`);
      expect(consent.text).toContain(connected.provider.clientInfo!.client_id);
    });

    it("whoami: the MCP server saw the user and the client, and no client credentials", async () => {
      const who = JSON.parse(textOf(await connected.client.callTool({ name: "whoami", arguments: {} }))) as Record<string, unknown>;
      expect(who).toMatchObject({
        subject: spec.subject,
        clientId: connected.provider.clientInfo!.client_id,
        authorization: null,
        cookie: null,
        upstreamAccessTokenPresent: false,
      });
      expect(String(who.user)).toContain(spec.user);
      expect(String(who.scopes).split(" ")).toContain("mcp");
    });

    it("listTools, echo, and countdown with its progress before the result", async () => {
      const { tools } = await connected.client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["countdown", "echo", "notify", "whoami"]);
      expect(textOf(await connected.client.callTool({ name: "echo", arguments: { message: `héllo ${spec.kind}` } }))).toBe(`héllo ${spec.kind}`);

      const events: string[] = [];
      const result = await connected.client.callTool({ name: "countdown", arguments: { from: 3, intervalMs: 20 } }, undefined, {
        onprogress: (p) => events.push(`progress ${p.progress}/${p.total}`),
      });
      events.push(`result ${textOf(result)}`);
      expect(events).toEqual(["progress 1/3", "progress 2/3", "progress 3/3", "result liftoff"]);
    });
  });
}
