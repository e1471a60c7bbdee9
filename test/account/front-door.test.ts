// The front door. GET / (and HEAD) is a page naming the service, the MCP URL to paste
// into a client, the sign-in it uses and the connected-apps link; /favicon.ico answers with an icon.
// Also under a PUBLIC_URL with a path, whether or not a proxy in front strips that path.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { faviconIco } from "../../src/views/front-page.ts";
import { startBroker, startBrokerUnderPath, type TestBroker } from "../support/start-broker.ts";
import { send } from "../support/oauth-client.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

describe("GET /", () => {
  let res: Awaited<ReturnType<typeof send>>;
  beforeAll(async () => {
    res = await send(`${t.url}/`);
  });

  it("is an HTML page, not the JSON 404 it was", () => {
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.text).toMatch(/^<!doctype html>/);
  });

  it("names the service (by default the host), the MCP URL in a copyable code element, and the sign-in", () => {
    expect(res.text).toContain(`<h1 id="resource-name">${new URL(t.url).host}</h1>`);
    expect(res.text).toContain(`<code class="copy" id="mcp-url">${t.url}/mcp</code>`);
    expect(res.text).toContain('<strong id="provider-name">Demo identity provider</strong>');
    expect(res.text).toContain('id="demo-mode"');
  });

  it("links to the connected-apps page", () => {
    expect(res.text).toContain(`<a class="button" id="account-link" href="${t.url}/account">`);
  });

  it("carries the pages' security headers: no framing, no script", () => {
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("default-src 'none'");
    expect(res.text).not.toMatch(/<script|<img|https?:\/\/(?!127\.0\.0\.1)/);
  });

  it("answers HEAD with the headers and no body", async () => {
    const head = await send(`${t.url}/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(head.headers.get("x-frame-options")).toBe("DENY");
    expect(head.text).toBe("");
  });

  it("answers other methods with 405, and other paths still with the JSON 404", async () => {
    const post = await send(`${t.url}/`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toContain("GET");
    const missing = await send(`${t.url}/no-such-page`);
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual(expect.objectContaining({ error: expect.any(String) }));
  });
});

describe("/favicon.ico", () => {
  it("is a 32×32 icon, cached for a week", async () => {
    const res = await fetch(`${t.url}/favicon.ico`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/x-icon");
    expect(res.headers.get("cache-control")).toBe("public, max-age=604800");
    const body = Buffer.from(await res.arrayBuffer());
    expect(body.equals(faviconIco())).toBe(true);
    // ICONDIR: reserved 0, type 1 (icon), one image of 32×32 at 32 bits, its bytes right after.
    expect([body.readUInt16LE(0), body.readUInt16LE(2), body.readUInt16LE(4)]).toEqual([0, 1, 1]);
    expect([body[6], body[7], body.readUInt16LE(12)]).toEqual([32, 32, 32]);
    expect(body.readUInt32LE(18) + body.readUInt32LE(14)).toBe(body.length);
    // Opaque in the middle, transparent in the rounded corner (alpha of the bottom-up rows).
    const alphaAt = (row: number, col: number) => body[22 + 40 + ((31 - row) * 32 + col) * 4 + 3];
    expect(alphaAt(4, 16)).toBe(255);
    expect(alphaAt(0, 0)).toBe(0);
  });

  it("answers HEAD", async () => {
    const head = await send(`${t.url}/favicon.ico`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toBe("image/x-icon");
  });
});

describe("a PUBLIC_URL with a path, and RESOURCE_NAME", () => {
  let b: TestBroker;
  let origin: string;
  let issuer: string;
  beforeAll(async () => {
    ({ broker: b, origin, issuer } = await startBrokerUnderPath({ RESOURCE_NAME: "Acme <Docs>" }));
  });
  afterAll(async () => b.stop());

  it.each(["/broker", "/broker/", "/"])("serves the front page at %s with the advertised URLs under the path", async (path) => {
    const res = await send(`${origin}${path}`);
    expect(res.status).toBe(200);
    expect(res.text).toContain('<h1 id="resource-name">Acme &lt;Docs&gt;</h1>');
    expect(res.text).toContain("<title>Acme &lt;Docs&gt;</title>");
    expect(res.text).toContain(`id="mcp-url">${issuer}/mcp</code>`);
    expect(res.text).toContain(`href="${issuer}/account"`);
  });

  it.each(["/favicon.ico", "/broker/favicon.ico"])("serves the icon at %s", async (path) => {
    const res = await send(`${origin}${path}`, { method: "HEAD" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/x-icon");
  });
});
