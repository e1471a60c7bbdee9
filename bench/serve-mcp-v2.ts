// The benchmark's MCP SDK v2 server (both eras: 2026-07-28 stateless, 2025 sessions), in its own process.
import { startV2McpServer } from "../test/gateway/v2-mcp-server.ts";

const server = await startV2McpServer({ record: false });
process.stdout.write(`MCP_URL ${server.url}\n`);
process.on("SIGTERM", () => void server.close().then(() => process.exit(0)));
