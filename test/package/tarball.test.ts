// What `npm pack` puts in the tarball a user installs (`npm install ./mcp-auth-broker-*.tgz`,
// `npx mcp-auth-broker serve`): what the installed broker reads at run time, and no tests, sources
// or dev tooling; no install script that needs files the tarball leaves out. The install and start
// themselves take a minute or two: `npm run test:package` (scripts/test-package.mjs, run by CI).
import { describe, expect, it } from "@jest/globals";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { projectRoot } from "../support/spawn.ts";

describe("the package's tarball", () => {
  it("carries what the installed broker needs and nothing a user does not", () => {
    const result = spawnSync(process.execPath, [path.join(projectRoot, "scripts/test-package.mjs"), "--files-only"], { cwd: projectRoot, encoding: "utf8" });
    expect(result.stderr).toBe("");
    expect(result.stdout).toMatch(/^test:package: \d+ files, \d+ bytes packed: ok\n$/);
    expect(result.status).toBe(0);
  });
});
