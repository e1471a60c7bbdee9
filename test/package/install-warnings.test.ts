// What `npm install` of a fresh clone prints on Node 20, read from the lock file it installs: no
// dependency that refuses the Node versions the project supports (EBADENGINE), and no install
// script left out of package.json's allowScripts (npm 11's "not yet covered" warning).
import { describe, expect, it } from "@jest/globals";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { projectRoot } from "../support/spawn.ts";

// npm's own range rules (the semver package every npm tree carries; it ships no types).
const semver = createRequire(import.meta.url)("semver") as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { version: string } | null;
};

interface LockedPackage {
  readonly version?: string;
  readonly engines?: { readonly node?: string } | readonly string[];
  readonly hasInstallScript?: boolean;
  readonly optional?: boolean;
}

const manifest = JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as {
  engines: { node: string };
  allowScripts?: Record<string, boolean>;
};
const lock = JSON.parse(readFileSync(path.join(projectRoot, "package-lock.json"), "utf8")) as { packages: Record<string, LockedPackage> };
// What npm installs on this machine: optional packages for other platforms are skipped, unwarned.
const installed = Object.entries(lock.packages).filter(([where]) => where !== "" && existsSync(path.join(projectRoot, where, "package.json")));
/** node_modules/a/node_modules/@b/c → @b/c */
const nameOf = (where: string) => where.slice(where.lastIndexOf("node_modules/") + "node_modules/".length);

describe("npm install on the Node versions package.json promises", () => {
  it("installs no package whose engines refuse the oldest supported Node (EBADENGINE)", () => {
    const oldest = semver.minVersion(manifest.engines.node)!.version;
    const refusing = installed
      .filter(([, pkg]) => !Array.isArray(pkg.engines) && typeof (pkg.engines as { node?: string } | undefined)?.node === "string")
      .filter(([, pkg]) => !semver.satisfies(oldest, (pkg.engines as { node: string }).node))
      .map(([where, pkg]) => `${where}@${pkg.version} (node ${(pkg.engines as { node: string }).node})`);
    expect(refusing).toEqual([]);
  });

  it("declares every dependency's install script in allowScripts, allowed or refused", () => {
    const declared = manifest.allowScripts ?? {};
    const covered = (name: string, version: string | undefined) => Object.hasOwn(declared, name) || Object.hasOwn(declared, `${name}@${version}`);
    const undeclared = installed.filter(([where, pkg]) => pkg.hasInstallScript && !covered(nameOf(where), pkg.version)).map(([where]) => nameOf(where));
    expect(undeclared).toEqual([]);
  });
});
