// Library use: an application serves MCP in-process behind the broker's bearer authentication.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { projectRoot } from "../support/spawn.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import type { CallerIdentity } from "../../src/index.ts";

let t: TestBroker;
const seen: CallerIdentity[] = [];

beforeAll(async () => {
  t = await startBroker(
    {},
    {
      mcpHandler: async (ctx, identity) => {
        seen.push(identity);
        ctx.body = { jsonrpc: "2.0", id: 1, result: { servedBy: "in-process", subject: identity.subject } };
      },
    },
  );
});
afterAll(async () => t.stop());

describe("createBroker({ mcpHandler })", () => {
  it("calls the in-process handler with the caller's identity, only after authentication", async () => {
    const unauthenticated = await fetch(`${t.url}/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(unauthenticated.status).toBe(401);
    expect(seen).toHaveLength(0);
    const { tokens, client } = await obtainTokens(t.url, { user: "inproc" });
    const res = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.access_token}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ result: { servedBy: "in-process", subject: "demo:inproc" } });
    expect(seen[0]).toMatchObject({ subject: "demo:inproc", user: "inproc", clientId: client.client_id, scopes: ["mcp"] });
    expect(t.broker.demoMcpUrl).toBeUndefined();
  });
});

describe("the package's export", () => {
  it("is compiled JavaScript with type declarations: a plain Node application imports it by name", async () => {
    // No TypeScript loader: node itself resolves package.json's exports (a self-reference by name).
    const script = `const m = await import("mcp-auth-broker"); console.log(JSON.stringify([import.meta.resolve("mcp-auth-broker"), typeof m.createBroker, typeof m.loadConfig]));`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { cwd: projectRoot });
    const [resolved, createBroker, loadConfig] = JSON.parse(stdout) as [string, string, string];
    expect(resolved).toMatch(/\/dist\/index\.js$/);
    expect([createBroker, loadConfig]).toEqual(["function", "function"]);
    const pkg = JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { exports: { ".": { types: string } } };
    expect(existsSync(path.join(projectRoot, pkg.exports["."].types))).toBe(true);
  });
});
