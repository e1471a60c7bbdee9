// At start, outside demo mode: the identity provider and the MCP server are probed as `check`
// probes them, in the background (a late IdP or MCP server must not stop the broker from serving),
// and each problem is logged once as a warning naming the cause and the setting to change.
import type { Config } from "../config/load.ts";
import type { Logger } from "../logger.ts";
import type { UpstreamProvider } from "../upstream/provider.ts";
import type { Finding } from "./finding.ts";
import { checkMcpServer } from "./mcp-server-probe.ts";
import { probeUpstream } from "./upstream-probe.ts";

/** Resolves with what was found, once every probe has answered (tests wait on it). */
export async function runStartProbes(config: Config, provider: UpstreamProvider, logger: Logger, version: string): Promise<Finding[]> {
  const findings = await Promise.all([
    probeUpstream(provider, config.publicUrl),
    // A stdio server is started per session, as its user: nothing to probe before one exists.
    config.stdioServer ? undefined : checkMcpServer(config, version),
  ]);
  const found = findings.filter((f): f is Finding => f !== undefined);
  for (const finding of found) {
    if (finding.ok) logger.debug({ check: finding.check }, `${finding.check} check passed at start: ${finding.detail}`);
    else logger.warn({ check: finding.check }, `${finding.check} check failed at start: ${finding.detail}`);
  }
  return found;
}
