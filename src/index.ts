// Library entry point: host the broker (or just its bearer middleware) inside your own Koa
// application, e.g. to serve an MCP server in-process instead of proxying to it.
export { loadConfig, readEnvironment, ConfigError, type Config } from "./config/load.ts";
export { createBroker, type Broker, type BrokerOptions } from "./broker.ts";
export { createServices, type Services } from "./services.ts";
export { bearerAuth, challenge, type BearerOptions, type BearerState } from "./gateway/bearer.ts";
export { mcpRouter, type McpHandler } from "./gateway/router.ts";
export type { CallerIdentity } from "./grants/caller-identity.ts";
export { createMcpProxy, type McpProxy, type McpProxyOptions } from "./gateway/proxy.ts";
export type { UpstreamProvider, UpstreamIdentity, UpstreamTokens } from "./upstream/provider.ts";
