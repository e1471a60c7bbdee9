// The installed package's version (package.json beside src/ or dist/): `--version`, and what the
// broker calls itself when it introduces itself to the MCP server.
import { readFileSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "./project-root.ts";

export const packageVersion = (JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { version: string }).version;
