// The pure rules behind the endpoints, checked directly (the HTTP tests check them at the edge):
// PKCE S256, resource canonicalization, redirect URI validation, scopes, client metadata.
import { describe, expect, it } from "@jest/globals";
import { DomainError } from "../../src/grants/errors.ts";
import { isValidS256Challenge, s256Challenge, verifyPkceS256 } from "../../src/grants/pkce.ts";
import { isAppSchemeRedirect, matchRedirectUri, redirectUriProblem } from "../../src/grants/redirect-uri.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { canonicalUri, resolveResource } from "../../src/grants/resource.ts";
import { parseScope, resolveScope } from "../../src/grants/scope.ts";

const codeOf = (fn: () => unknown): string | null => {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof DomainError ? err.code : `not a DomainError: ${String(err)}`;
  }
};

describe("PKCE S256 (RFC 7636)", () => {
  it("matches the RFC 7636 appendix B example", () => {
    const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    expect(s256Challenge(verifier)).toBe(challenge);
    expect(verifyPkceS256(verifier, challenge)).toBe(true);
    expect(verifyPkceS256(verifier.replace("d", "e"), challenge)).toBe(false);
  });

  it("accepts verifiers of 43 to 128 unreserved characters only", () => {
    for (const verifier of ["a".repeat(43), "A-._~".repeat(20).slice(0, 128)]) expect(verifyPkceS256(verifier, s256Challenge(verifier))).toBe(true);
    for (const verifier of ["a".repeat(42), "a".repeat(129), `${"a".repeat(42)}+`, `${"a".repeat(42)} `, `${"a".repeat(42)}/`]) {
      expect(verifyPkceS256(verifier, s256Challenge(verifier))).toBe(false);
    }
  });

  it("recognises the shape of an S256 challenge", () => {
    expect(isValidS256Challenge(s256Challenge("a".repeat(43)))).toBe(true);
    for (const bad of ["", "a".repeat(42), "a".repeat(44), `${"a".repeat(42)}=`, `${"a".repeat(42)}+`]) expect(isValidS256Challenge(bad)).toBe(false);
  });
});

describe("resource canonicalization (RFC 8707)", () => {
  it.each([
    ["https://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"],
    ["HTTPS://mcp.example.com/mcp", "https://mcp.example.com/mcp"],
    ["https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"],
    ["http://localhost:80/mcp", "http://localhost/mcp"],
    ["https://mcp.example.com:8443/mcp", "https://mcp.example.com:8443/mcp"],
    ["https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"],
    ["https://mcp.example.com/", "https://mcp.example.com"],
    ["https://mcp.example.com/broker/mcp", "https://mcp.example.com/broker/mcp"],
  ])("%s → %s", (input, canonical) => {
    expect(canonicalUri(input)).toBe(canonical);
  });

  it.each([
    "https://mcp.example.com/mcp#f",
    "https://mcp.example.com/mcp#",
    "/mcp",
    "mcp",
    "",
    "urn:example:mcp",
    "https://user:pw@mcp.example.com/mcp",
    "https://user@mcp.example.com/mcp",
  ])("refuses %j", (input) => {
    expect(canonicalUri(input)).toBeNull();
  });

  it("binds a request without resource to the protected resource, and refuses any other", () => {
    const ours = "https://mcp.example.com/mcp";
    expect(resolveResource(undefined, ours)).toBe(ours);
    expect(resolveResource("https://MCP.example.com:443/mcp/", ours)).toBe(ours);
    expect(codeOf(() => resolveResource("https://mcp.example.com/other", ours))).toBe("invalid_target");
    expect(codeOf(() => resolveResource("https://mcp.example.com/mcp#x", ours))).toBe("invalid_target");
    expect(codeOf(() => resolveResource("", ours))).toBe("invalid_target");
  });
});

describe("redirect URIs", () => {
  it.each([
    "https://app.example.com/cb",
    "http://localhost/cb",
    "http://localhost:1234/cb",
    "http://127.0.0.1:5/cb",
    "http://[::1]:7/cb",
    "https://app.example.com/cb?x=1",
  ])("accepts %s", (uri) => {
    expect(redirectUriProblem(uri)).toBeNull();
  });

  it.each([
    "http://app.example.com/cb",
    "https://app.example.com/cb#x",
    "/cb",
    "app://cb",
    "javascript:alert(1)",
    "http://localhost.example.com/cb",
    " https://app.example.com/cb",
    "https://app.example.com/c\tb",
  ])("refuses %j", (uri) => {
    expect(redirectUriProblem(uri)).toEqual(expect.any(String));
  });
});

describe("loopback redirect URIs: canonical hosts only, never a user name", () => {
  // The WHATWG parser turns 0x7f000001, 2130706433, 0177.0.0.1, 127.1 and 127.0.0.1. into
  // 127.0.0.1, and reads "evil.example@" as a user name: the string as written is what counts.
  it.each([
    "http://evil.com@127.0.0.1/cb",
    "http://user:pw@127.0.0.1/cb",
    "http://@127.0.0.1/cb",
    "http://0x7f000001/cb",
    "http://2130706433/cb",
    "http://0177.0.0.1/cb",
    "http://127.1/cb",
    "http://127.0.0.1./cb",
    "http://127.0.0.2/cb",
    "http://[0:0:0:0:0:0:0:1]/cb",
    "http://LOCALHOST/cb",
    "http://localhost./cb",
    "http:/127.0.0.1/cb",
    "http://127.0.0.1:0/cb",
    "http://127.0.0.1:080/cb",
    "http://127.0.0.1\\@evil.example/cb",
    "https://user@app.example.com/cb",
    "https://evil.example@app.example.com/cb",
  ])("refuses %j", (uri) => {
    expect(redirectUriProblem(uri)).toEqual(expect.any(String));
    expect(redirectUriProblem(uri, { appSchemes: true })).toEqual(expect.any(String));
  });

  it.each(["http://127.0.0.1/cb", "http://127.0.0.1:65535/cb", "http://[::1]:1/cb", "http://localhost/", "http://127.0.0.1", "http://localhost:33418/"])(
    "accepts %j",
    (uri) => {
      expect(redirectUriProblem(uri)).toBeNull();
    },
  );

  it("never matches such a URI at /authorize, even one stored under an older rule", () => {
    for (const uri of ["http://evil.com@127.0.0.1/cb", "http://0x7f000001/cb", "http://127.1/cb", "http://127.0.0.1./cb"]) {
      expect(matchRedirectUri([uri], uri)).toBeNull();
    }
    expect(matchRedirectUri(["http://127.0.0.1/cb"], "http://127.1:5/cb")).toBeNull();
    expect(matchRedirectUri(["http://127.0.0.1/cb"], "http://127.0.0.1:5/cb")).toBe("http://127.0.0.1:5/cb");
    expect(matchRedirectUri(["microsoft-edge:https://evil.example/"], "microsoft-edge:https://evil.example/")).toBeNull();
  });
});

describe("app-scheme redirect URIs (RFC 8252 §7.1)", () => {
  const app = { appSchemes: true };
  it.each([
    "cursor://anysphere.cursor-mcp/oauth/callback",
    "vscode://vscode.github-authentication/did-authenticate",
    "com.example.app:/cb",
    "zed://mcp/oauth/callback",
  ])("accepts %j when app schemes are allowed, and not otherwise", (uri) => {
    expect(redirectUriProblem(uri, app)).toBeNull();
    expect(redirectUriProblem(uri)).toEqual(expect.any(String));
    expect(isAppSchemeRedirect(uri)).toBe(true);
  });

  it.each([
    "javascript:alert(1)",
    "JAVASCRIPT:alert(1)",
    "vbscript:x",
    "data:text/html,x",
    "blob:https://a.example/1",
    "about:blank",
    "file:///etc/passwd",
    "ws://127.0.0.1/cb",
    "wss://a.example/cb",
    "view-source:https://a.example",
    "http://example.com/cb",
    "cursor://anysphere.cursor-mcp/cb#f",
  ])("refuses %j even when app schemes are allowed", (uri) => {
    expect(redirectUriProblem(uri, app)).toEqual(expect.any(String));
  });

  // What an attack trial registered under a deny-list: browsers' own schemes (which open any page,
  // or the URL they carry, in that browser), wrappers of other URLs, system settings, a scheme
  // with neither :/ nor ://, and single-label schemes no MCP client uses.
  it.each<[string, RegExp]>([
    ["microsoft-edge:https://evil.example/", /web browser's own/],
    ["googlechrome://evil.example/", /web browser's own/],
    ["firefox:https://evil.example/", /web browser's own/],
    ["x-safari-https://evil.example/", /web browser's own/],
    ["jar:file:///tmp/x.jar!/a", /never allowed/],
    ["ms-settings:privacy", /neither a reverse domain name/],
    ["x-javascript:alert(1)", /neither a reverse domain name/],
    ["cursor:cb", /:\/ or :\/\//],
    ["app://cb", /neither a reverse domain name/],
    ["com.example.app://https://evil.example/", /wraps another URL/],
    ["com.example.app:/javascript:alert(1)", /wraps another URL/],
    ["com.example.app:/cb?next=https%3A%2F%2Fevil.example", /wraps another URL/],
    ["cursor://evil.example@anysphere.cursor-mcp/oauth/callback", /user name or password/],
  ])("refuses %j (%s)", (uri, why) => {
    expect(redirectUriProblem(uri, app)).toMatch(why);
    expect(isAppSchemeRedirect(uri)).toBe(false);
  });

  it("is decided by the client's auth method and the switch", () => {
    const body = { redirect_uris: ["cursor://anysphere.cursor-mcp/oauth/callback"] };
    expect(codeOf(() => parseClientMetadata({ ...body, token_endpoint_auth_method: "none" }, "dynamic", { allowAppSchemeRedirects: true }))).toBeNull();
    expect(codeOf(() => parseClientMetadata({ ...body, token_endpoint_auth_method: "none" }, "dynamic", { allowAppSchemeRedirects: false }))).toBe(
      "invalid_redirect_uri",
    );
    expect(codeOf(() => parseClientMetadata({ ...body, token_endpoint_auth_method: "client_secret_post" }, "dynamic", { allowAppSchemeRedirects: true }))).toBe(
      "invalid_redirect_uri",
    );
  });
});

describe("redirect URI matching: exact, any port on loopback (RFC 8252 §7.3)", () => {
  it.each([
    [["https://a.example/cb"], "https://a.example/cb", true],
    [["https://a.example/cb"], "https://a.example:444/cb", false],
    [["http://127.0.0.1:33418/"], "http://127.0.0.1:51000/", true],
    [["http://127.0.0.1:33418/"], "http://127.0.0.1:51000", true],
    [["http://127.0.0.1/cb"], "http://127.0.0.1:1/cb", true],
    [["http://[::1]:1/cb"], "http://[::1]:2/cb", true],
    [["http://localhost:1/cb?a=1"], "http://localhost:2/cb?a=1", true],
    [["http://localhost:1/cb?a=1"], "http://localhost:2/cb?a=2", false],
    [["http://localhost:1/cb"], "http://127.0.0.1:1/cb", false],
    [["http://localhost:1/cb"], "http://LOCALHOST:1/cb", false],
    [["http://localhost:1/cb"], "https://localhost:2/cb", false],
    [["http://localhost:1/cb"], "http://localhost:2/cb/", false],
    [["http://localhost:1/cb"], "http://localhost:2/cb#x", false],
    [["http://localhost:1/cb"], "http://localhost:0/cb", false],
    [["http://localhost:1/cb"], "http://localhost:99999/cb", false],
    [["http://localhost:1/cb"], "http://localhost:2@evil.example/cb", false],
    [["http://localhost:1/cb"], "http://localhost:2/cb\n", false],
    [["cursor://anysphere.cursor-mcp/oauth/callback"], "cursor://anysphere.cursor-mcp/oauth/callback", true],
    [["cursor://anysphere.cursor-mcp/oauth/callback"], "cursor://anysphere.cursor-mcp:1/oauth/callback", false],
  ])("%j with %j: %s", (registered, asked, matches) => {
    expect(matchRedirectUri(registered, asked)).toBe(matches ? asked : null);
  });
});

describe("scopes", () => {
  it("normalizes and always includes the default scope for a new grant", () => {
    expect(resolveScope(undefined)).toBe("mcp");
    expect(resolveScope("  ")).toBe("mcp");
    expect(resolveScope("offline_access")).toBe("mcp offline_access");
    expect(resolveScope("offline_access mcp offline_access")).toBe("mcp offline_access");
    expect(resolveScope(undefined, "mcp offline_access")).toBe("mcp offline_access");
    expect(resolveScope(undefined, "offline_access")).toBe("mcp offline_access");
  });

  it("passes a requested set through unchanged (for refresh narrowing)", () => {
    expect(parseScope(undefined)).toBeUndefined();
    expect(parseScope("offline_access")).toEqual(["offline_access"]);
  });

  it.each([["admin"], ["mcp  offline_access"], ['mcp "x'], ["mcp\\x"], [`mcp ${"x".repeat(1001)}`]])("refuses %j with invalid_scope", (scope) => {
    expect(codeOf(() => parseScope(scope))).toBe("invalid_scope");
  });

  it("keeps a client within the scope it registered", () => {
    expect(codeOf(() => resolveScope("offline_access", "mcp"))).toBe("invalid_scope");
    expect(resolveScope("mcp", "mcp offline_access")).toBe("mcp");
  });
});

describe("client metadata (shared by /register and the CLI)", () => {
  it("applies RFC 7591 defaults, with the grants MCP clients expect when grant_types is absent", () => {
    const m = parseClientMetadata({ redirect_uris: ["https://a.example/cb"] }, "dynamic");
    expect(m).toMatchObject({
      tokenEndpointAuthMethod: "client_secret_basic",
      grantTypes: ["authorization_code", "refresh_token"],
      responseTypes: ["code"],
      scope: null,
      clientName: null,
    });
  });

  it("deduplicates and normalizes", () => {
    const m = parseClientMetadata(
      {
        redirect_uris: ["https://a.example/cb", "https://a.example/cb"],
        grant_types: ["authorization_code", "authorization_code", "refresh_token"],
        scope: "offline_access mcp mcp",
        token_endpoint_auth_method: "none",
      },
      "dynamic",
    );
    expect(m).toMatchObject({ redirectUris: ["https://a.example/cb"], grantTypes: ["authorization_code", "refresh_token"], scope: "mcp offline_access" });
  });

  it.each([
    [{ redirect_uris: ["http://evil.example/cb"] }, "invalid_redirect_uri"],
    [{ token_endpoint_auth_method: "none" }, "invalid_redirect_uri"],
    [{ redirect_uris: ["https://a.example/cb"], grant_types: ["implicit"] }, "invalid_client_metadata"],
    [{ grant_types: ["client_credentials"], token_endpoint_auth_method: "none" }, "invalid_client_metadata"],
    ["not an object", "invalid_client_metadata"],
    [null, "invalid_client_metadata"],
  ])("refuses %j with %s", (input, code) => {
    expect(codeOf(() => parseClientMetadata(input, "manual"))).toBe(code);
  });
});
