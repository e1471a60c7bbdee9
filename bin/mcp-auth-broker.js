#!/usr/bin/env node
// The operator CLI, compiled to dist/ by `npm run build` (which `npm install` runs).
import { existsSync } from "node:fs";

const entry = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("mcp-auth-broker: dist/ is missing; run `npm run build` (npm install does it) and try again\n");
  process.exit(1);
}
await import(entry.href);
