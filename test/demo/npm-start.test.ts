// Zero-config demo: the real `npm start` process in an empty folder serves a demo that the real
// MCP SDK client completes end to end (OAuth through the demo IdP, then tools).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { runToEnd, startServer, waitForOutput } from "../support/spawn.ts";
import { freePort } from "../support/start-broker.ts";
import { CallbackServer, connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { toolText } from "../gateway/harness.ts";

let child: ChildProcess;
let finished: ReturnType<typeof runToEnd>;
let banner = "";
let port = 0;
const dir = mkdtempSync(path.join(tmpdir(), "mab-demo-"));

beforeAll(async () => {
  port = await freePort();
  // localhost, as a newcomer's browser would use.
  child = startServer({ cwd: dir, env: { PORT: String(port) } });
  finished = runToEnd(child, 60_000);
  banner = await waitForOutput(child, /Connect\./);
});
afterAll(async () => {
  if (child.exitCode === null) child.kill("SIGKILL");
  await finished.catch(() => undefined);
});

describe("npm start with nothing configured", () => {
  it("announces demo mode, the MCP URL and how to open it in the MCP Inspector", () => {
    expect(banner).toContain(`MCP endpoint: http://localhost:${port}/mcp`);
    expect(banner).toContain("DEMO MODE");
    expect(banner).toContain("npx @modelcontextprotocol/inspector");
    expect(existsSync(path.join(dir, "data/broker.db"))).toBe(true);
    expect(existsSync(path.join(dir, "data/secret.key"))).toBe(true);
  });

  it("is completed end to end by the MCP SDK client", async () => {
    const callback = await new CallbackServer().start();
    try {
      const browser = new HttpBrowser();
      const { client, transport } = await connectWithOAuth(`http://localhost:${port}/mcp`, callback, async (url) => {
        // Consent and the demo IdP's login, then the redirect lands on the client's callback.
        const landing = await browser.walk(url.href, callback.url, answerAs("newcomer"));
        await fetch(landing.href);
      });
      const seen = JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} }))) as Record<string, unknown>;
      expect(seen.subject).toBe("demo:newcomer");
      // The demo MCP server believes the headers only after verifying the broker's signed assertion.
      expect(seen.assertion).toMatchObject({ verified: true, sub: "demo:newcomer" });
      expect(toolText(await client.callTool({ name: "echo", arguments: { message: "hi" } }))).toContain("hi");
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    } finally {
      await callback.close();
    }
  });

  it("stops promptly and cleanly on SIGTERM, even after keep-alive connections", async () => {
    child.kill("SIGTERM");
    const result = await finished;
    expect(result.code).toBe(0);
    // Idle keep-alive connections did not hold it until the drain deadline (10 s).
    expect(result.stdout + result.stderr).not.toContain("shutdown deadline reached");
  });
});
