// The other names clients give the one resource the broker serves: the MCP URL
// with a query string, the bare origin, PUBLIC_URL itself. Each maps to the canonical resource;
// anything else is still invalid_target.
import { describe, expect, it } from "@jest/globals";
import { resolveResource } from "../../src/grants/resource.ts";
import { DomainError } from "../../src/grants/errors.ts";

const codeOf = (fn: () => unknown): string | null => {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof DomainError ? err.code : "thrown";
  }
};

describe("resolveResource aliases", () => {
  const ours = "https://mcp.example.com/mcp";
  const underPath = "https://example.com/broker/mcp";

  it.each([
    ["the MCP URL with a query string", ours, "https://mcp.example.com/mcp?tenant=acme"],
    ["the MCP URL with a query string and a trailing slash", ours, "https://MCP.example.com/mcp/?x=1"],
    ["the bare origin", ours, "https://mcp.example.com"],
    ["the bare origin with a slash (URL.href of a pathless URL)", ours, "https://mcp.example.com/"],
    ["the origin when PUBLIC_URL has a path", underPath, "https://example.com"],
    ["PUBLIC_URL itself", underPath, "https://example.com/broker"],
  ])("maps %s to the canonical resource", (_what, resource, value) => {
    expect(resolveResource(value, resource)).toBe(resource);
  });

  it.each([
    ["another host", ours, "https://other.example.com"],
    ["another scheme", ours, "http://mcp.example.com"],
    ["another port", ours, "https://mcp.example.com:8443"],
    ["the origin with a query", ours, "https://mcp.example.com/?x=1"],
    ["a sub-path", ours, "https://mcp.example.com/mcp/x"],
    ["a sibling path", underPath, "https://example.com/other"],
    ["a fragment", ours, "https://mcp.example.com/mcp?x#y"],
  ])("still refuses %s", (_what, resource, value) => {
    expect(codeOf(() => resolveResource(value, resource))).toBe("invalid_target");
  });
});

describe("resolving again (names already resolved are remembered per set of resources)", () => {
  const resources = {
    publicUrl: "https://mcp.example.com",
    servers: [
      { resourceUrl: "https://mcp.example.com/mcp", isDefault: true },
      { resourceUrl: "https://mcp.example.com/servers/docs/mcp", isDefault: false },
    ],
  };

  it("gives each name the same answer every time, and still refuses what names no server", () => {
    const names = [
      ["https://mcp.example.com/servers/docs/mcp", "https://mcp.example.com/servers/docs/mcp"],
      ["https://MCP.example.com/servers/docs/mcp/", "https://mcp.example.com/servers/docs/mcp"],
      ["https://mcp.example.com", "https://mcp.example.com/mcp"],
      ["https://mcp.example.com/mcp", "https://mcp.example.com/mcp"],
    ];
    for (let round = 0; round < 3; round++) {
      for (const [value, server] of names) expect(resolveResource(value, resources)).toBe(server);
      expect(codeOf(() => resolveResource("https://mcp.example.com/servers/other/mcp", resources))).toBe("invalid_target");
      expect(codeOf(() => resolveResource("https://mcp.example.com/mcp#x", resources))).toBe("invalid_target");
    }
    // The same name against another set of resources is decided by that set.
    const other = { publicUrl: "https://mcp.example.com", servers: [{ resourceUrl: "https://mcp.example.com/mcp", isDefault: true }] };
    expect(codeOf(() => resolveResource("https://mcp.example.com/servers/docs/mcp", other))).toBe("invalid_target");
  });

  it("resolves ever new names of a server past what it remembers", () => {
    for (let n = 0; n < 600; n++) expect(resolveResource(`https://mcp.example.com/mcp?n=${n}`, resources)).toBe("https://mcp.example.com/mcp");
    expect(resolveResource("https://mcp.example.com/servers/docs/mcp?n=1", resources)).toBe("https://mcp.example.com/servers/docs/mcp");
    expect(codeOf(() => resolveResource("https://mcp.example.com/other", resources))).toBe("invalid_target");
  });
});
