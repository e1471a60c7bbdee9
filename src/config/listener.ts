// Where the broker listens (PORT, HOST) and the URL it is known by (PUBLIC_URL): the issuer and
// base of every advertised address, so plain http is refused outside this machine unless asked for.
import { z } from "zod";
import { bool, httpUrl, intIn, parseVar } from "./parse-var.ts";
import { ConfigError, isLoopbackHost, type Env } from "./values.ts";

export interface Listener {
  readonly port: number;
  readonly host: string;
  /** Canonical, without trailing slash. */
  readonly publicUrl: string;
  /** PUBLIC_URL's host (with port): the protected service's name when RESOURCE_NAME is not set. */
  readonly publicHost: string;
  readonly insecurePublicUrl: boolean;
}

export function parseListener(env: Env): Listener {
  const port = parseVar(env, "PORT", intIn(0, 65535, 3000), "a port number between 0 and 65535");
  const host = parseVar(env, "HOST", z.string().min(1).optional(), "a listening address") ?? "127.0.0.1";

  const publicUrlRaw = parseVar(env, "PUBLIC_URL", httpUrl.optional(), "an absolute http(s) URL without query or fragment, e.g. https://mcp.example.com");
  const publicUrlParsed = new URL(publicUrlRaw ?? `http://localhost:${port}`);
  const allowInsecurePublicUrl = parseVar(env, "INSECURE_PUBLIC_URL", bool(false), "true or false");
  const insecurePublicUrl = publicUrlParsed.protocol !== "https:" && !isLoopbackHost(publicUrlParsed.hostname);
  if (insecurePublicUrl && !allowInsecurePublicUrl) {
    throw new ConfigError(
      "PUBLIC_URL",
      `expected an https:// URL (plain http is allowed only for localhost/127.0.0.1), got ${JSON.stringify(publicUrlRaw)}; put a TLS reverse proxy in front (README: "Behind a reverse proxy"), or set INSECURE_PUBLIC_URL=true to try it on a LAN without TLS`,
    );
  }
  // The URL parser lower-cases scheme and host and drops default ports: the canonical form.
  const publicUrl = (publicUrlParsed.origin + publicUrlParsed.pathname).replace(/\/+$/, "");
  return { port, host, publicUrl, publicHost: publicUrlParsed.host, insecurePublicUrl };
}

/** Demo mode signs anyone in as anyone: it listens on this machine only, unless the operator insists. */
export function refuseDemoOnPublicHost(host: string, demoMode: boolean, allowDemoOnPublicHost: boolean): void {
  if (demoMode && !isLoopbackHost(host) && !allowDemoOnPublicHost) {
    throw new ConfigError(
      "HOST",
      `expected a loopback address in demo mode (anyone could log in as anyone), got ${JSON.stringify(host)}; configure a real UPSTREAM_PROVIDER or set DEMO_ALLOW_PUBLIC_HOST=true`,
    );
  }
}
