// The MCP server of the benchmark, in its own process so it does not share a core with the load.
import { startDemoMcpServer } from "../src/demo/mcp-server.ts";

const server = await startDemoMcpServer();
process.stdout.write(`MCP_URL ${server.url}\n`);
process.on("SIGTERM", () => void server.close().then(() => process.exit(0)));
