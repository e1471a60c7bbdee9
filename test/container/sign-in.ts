// A user's first sign-in through a broker running in a container, as an MCP client does it: the
// real MCP SDK client, discovery from the 401, registration, consent and the demo IdP's login.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Client as SdkClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallbackServer, connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { toolText } from "../gateway/harness.ts";

export interface SignedIn {
  readonly connected: ConnectedClient;
  readonly accessToken: string;
  /** What the MCP server behind the broker was told about the caller (the demo's whoami). */
  readonly subject: unknown;
  close(): Promise<void>;
}

export async function whoami(client: Client): Promise<unknown> {
  return (JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} }))) as { subject?: unknown }).subject;
}

/** Signs `user` in at `brokerUrl` and calls a tool; the client stays connected until `close`. */
export async function signIn(brokerUrl: string, user: string): Promise<SignedIn> {
  const callback = await new CallbackServer().start();
  try {
    const browser = new HttpBrowser();
    const connected = await connectWithOAuth(`${brokerUrl}/mcp`, callback, async (url) => {
      const landing = await browser.walk(url.href, callback.url, answerAs(user));
      await fetch(landing.href);
    });
    const accessToken = connected.provider.savedTokens?.access_token;
    if (!accessToken) throw new Error("the sign-in ended without an access token");
    return {
      connected,
      accessToken,
      subject: await whoami(connected.client),
      close: async () => {
        await connected.client.close().catch(() => undefined);
        await callback.close();
      },
    };
  } catch (err) {
    await callback.close();
    throw err;
  }
}

/** An MCP session at `brokerUrl` with a bearer token obtained elsewhere. */
export async function connectWithToken(brokerUrl: string, accessToken: string): Promise<Client> {
  const client = new SdkClient({ name: "mcp-auth-broker-container-test", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${brokerUrl}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${accessToken}` } } }),
  );
  return client;
}
