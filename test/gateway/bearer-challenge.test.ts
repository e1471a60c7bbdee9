// Reading an MCP server's Bearer challenge (RFC 6750 §3, RFC 9110 §11.2 auth-params): what the
// proxy relies on to turn a 403 insufficient_scope into the broker's own challenge.
import { describe, expect, it } from "@jest/globals";
import { challenge, parseBearerChallenge } from "../../src/gateway/bearer.ts";

describe("parseBearerChallenge", () => {
  it("reads quoted and token parameters, case-insensitive names, escapes", () => {
    expect(parseBearerChallenge('Bearer error="insufficient_scope", Scope="docs:write  docs:read", realm=x, error_description="say \\"hi\\""')).toEqual({
      error: "insufficient_scope",
      scope: "docs:write  docs:read",
      realm: "x",
      error_description: 'say "hi"',
    });
  });

  it("finds the Bearer challenge after another scheme's, in one value or several", () => {
    expect(parseBearerChallenge('Basic realm="a", Bearer error="invalid_token"')).toEqual({ error: "invalid_token" });
    expect(parseBearerChallenge(['Basic realm="a"', "bearer scope=mcp"])).toEqual({ scope: "mcp" });
  });

  it("is null without a Bearer challenge, and reads a bare one as no parameters", () => {
    expect(parseBearerChallenge(undefined)).toBeNull();
    expect(parseBearerChallenge('Basic realm="Bearer"')).toBeNull();
    expect(parseBearerChallenge("Bearer")).toEqual({});
  });

  it("round-trips the broker's own challenge", () => {
    const value = challenge(
      { resourceMetadataUrl: "https://b.example/.well-known/oauth-protected-resource/mcp", requiredScope: "mcp" },
      { code: "insufficient_scope", description: 'needs "docs:write"', scope: "docs:write mcp" },
    );
    expect(parseBearerChallenge(value)).toEqual({
      resource_metadata: "https://b.example/.well-known/oauth-protected-resource/mcp",
      scope: "docs:write mcp",
      error: "insufficient_scope",
      error_description: 'needs "docs:write"',
    });
  });
});
