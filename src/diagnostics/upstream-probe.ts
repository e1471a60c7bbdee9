// Does the identity provider answer, and does it accept the broker's client credentials? OIDC
// discovery, a made-up code exchanged at the token endpoint (refused as a bad code only once the
// client was accepted), and for GitHub its API, where every session is checked. `check` prints the
// finding; the broker logs it at start.
import { callbackUrl, type Config } from "../config/load.ts";
import { CREDENTIAL_CHECK_CODE, UpstreamError, type UpstreamProvider } from "../upstream/provider.ts";
import type { Finding } from "./finding.ts";

const CHECK = "identity provider";

export async function probeUpstream(provider: UpstreamProvider, publicUrl: string): Promise<Finding> {
  try {
    await provider.prepare?.();
    await provider.verifyCredentials(callbackUrl(publicUrl));
    // GITHUB_API_URL is another host than GITHUB_URL (GitHub Enterprise: another path): a token it
    // never issued is answered "unknown" by an API that is there.
    if (provider.kind === "github") await provider.check({ accessToken: CREDENTIAL_CHECK_CODE, refreshable: false });
    return { check: CHECK, ok: true, detail: `${provider.displayName} accepts UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET` };
  } catch (err) {
    const message = err instanceof UpstreamError ? err.message : String(err);
    return { check: CHECK, ok: false, detail: `${provider.displayName}: ${message}` };
  }
}

/** The identity provider the configuration names; in demo mode, the built-in one (nothing to probe). */
export async function checkUpstream(config: Config, provider?: UpstreamProvider): Promise<Finding> {
  if (config.demoMode)
    return { check: CHECK, ok: true, detail: "demo mode: the built-in demo identity provider starts with the broker (anyone can sign in as anyone)" };
  if (!provider) {
    const { createUpstreamProvider } = await import("../upstream/create.ts");
    provider = createUpstreamProvider(config.upstream, { policy: config.accessPolicy });
  }
  return probeUpstream(provider, config.publicUrl);
}
