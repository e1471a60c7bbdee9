// A mistyped address in a browser (/acount) gets a page saying so, not raw JSON; clients that do
// not ask for HTML first (curl, the SDKs, anything sending */*) keep the JSON answer, and /mcp its
// JSON-RPC one.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";

// What Chromium sends when the address bar opens a page.
const BROWSER_ACCEPT =
  "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

describe("addresses the broker does not serve", () => {
  it("a browser's mistyped page gets an HTML 404 page pointing to the front page", async () => {
    const res = await fetch(`${t.url}/acount`, { headers: { accept: BROWSER_ACCEPT } });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const body = await res.text();
    expect(body).toContain("<h1>Page not found</h1>");
    expect(body).toContain("There is no page at /acount.");
    expect(body).toContain(`start from ${t.url}/`);
  });

  it.each([["*/*"], ["application/json"], [undefined]])("Accept %s keeps the JSON answer", async (accept) => {
    const res = await fetch(`${t.url}/acount`, { headers: accept ? { accept } : {} });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "not_found", error_description: "No endpoint at GET /acount." });
  });

  it("a browser posting to a page that only shows itself gets an HTML 405 page; others keep Allow and no page", async () => {
    const browser = await fetch(`${t.url}/`, { method: "POST", headers: { accept: BROWSER_ACCEPT } });
    expect(browser.status).toBe(405);
    expect(browser.headers.get("allow")).toContain("GET");
    expect(browser.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await browser.text()).toMatch(/<h1>This page cannot be used this way<\/h1>[\s\S]*\/ does not take POST requests \(only [A-Z, ]*GET/);
    const curl = await fetch(`${t.url}/`, { method: "POST" });
    expect(curl.status).toBe(405);
    expect(curl.headers.get("content-type")).not.toContain("text/html");
  });

  it("under /mcp the answer stays JSON-RPC, whatever the browser asks for", async () => {
    const res = await fetch(`${t.url}/mcp`, { headers: { accept: BROWSER_ACCEPT } });
    expect(res.status).toBe(401);
    expect(res.headers.get("content-type")).toContain("application/json");
  });
});
