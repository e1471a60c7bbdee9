// The demo MCP server's tools, as the start banner names them (a test holds them to the server's
// own tools/list, and the README to this list).
export const DEMO_TOOLS = ["whoami", "echo", "countdown", "notify"] as const;
