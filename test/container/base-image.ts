// A stand-in for the official Node 20 slim image, made here because this machine kind reaches no
// image registry: Debian bookworm (debootstrap's minbase, from the mirror apt already uses), the
// host's own Node binary and npm in /usr/local, and the `node` user (uid 1000) the official image has.
// Kept between runs: made again only when missing or when the host's Node changed.
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { imageExists, podman, podmanOk } from "./podman.ts";

const NODE_LABEL = "mab.host-node";

/** The Debian mirror apt uses here, read from its sources (no host is written in the repository). */
export function aptMirror(): string {
  const files = ["/etc/apt/sources.list"];
  const dir = "/etc/apt/sources.list.d";
  if (existsSync(dir)) for (const name of readdirSync(dir).sort()) if (/\.(list|sources)$/.test(name)) files.push(path.join(dir, name));
  const entries: { uri: string; suites: string[]; components: string[] }[] = [];
  for (const file of files.filter((f) => existsSync(f))) {
    const text = readFileSync(file, "utf8");
    if (file.endsWith(".sources")) {
      // deb822: stanzas separated by blank lines, "Field: value" lines, comments start with #.
      for (const stanza of text.split(/\n\s*\n/)) {
        const fields = new Map<string, string>();
        for (const line of stanza.split("\n")) {
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (m) fields.set(m[1]!.toLowerCase(), m[2]!.trim());
        }
        if (!(fields.get("types") ?? "").split(/\s+/).includes("deb") || /^no$/i.test(fields.get("enabled") ?? "")) continue;
        for (const uri of (fields.get("uris") ?? "").split(/\s+/).filter(Boolean))
          entries.push({ uri, suites: (fields.get("suites") ?? "").split(/\s+/), components: (fields.get("components") ?? "").split(/\s+/) });
      }
    } else {
      for (const line of text.split("\n")) {
        const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$/.exec(line.trim());
        if (m) entries.push({ uri: m[1]!, suites: [m[2]!], components: m[3]!.split(/\s+/) });
      }
    }
  }
  // bookworm's own main archive; failing that, any Debian main archive (not -updates, -security).
  const main = entries.filter((e) => e.components.includes("main"));
  const found = main.find((e) => e.suites.includes("bookworm")) ?? main.find((e) => e.suites.some((s) => /^[a-z]+$/.test(s)));
  if (!found) throw new Error(`no Debian mirror found in ${files.join(", ")}: debootstrap needs one`);
  return found.uri;
}

function run(command: string, args: readonly string[]): void {
  const result = spawnSync(command, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(" ")} failed (${result.status}):\n${(result.stdout ?? "").slice(-4000)}${result.stderr ?? ""}`);
}

/** The host's Node and the npm that came with it. */
function hostNode(): { binary: string; npmDir: string } {
  const binary = realpathSync(process.execPath);
  const npmDir = path.resolve(path.dirname(binary), "../lib/node_modules/npm");
  if (!existsSync(path.join(npmDir, "bin/npm-cli.js"))) throw new Error(`npm not found beside ${binary} (looked in ${npmDir})`);
  return { binary, npmDir };
}

/** Makes `name` unless it exists from the same host Node; says which it did. */
export async function ensureBaseImage(name: string, workDir: string): Promise<"kept" | "made"> {
  if (await imageExists(name)) {
    const node = await podmanOk(["image", "inspect", "--format", `{{ index .Labels "${NODE_LABEL}" }}`, name]);
    if (node === process.version) return "kept";
    await podman(["rmi", name]);
  }
  const { binary, npmDir } = hostNode();
  const rootfs = mkdtempSync(path.join(workDir, "rootfs-"));
  try {
    const mirror = aptMirror();
    console.log(`debootstrap --variant=minbase bookworm from ${mirror} (a minute or more)…`);
    run("debootstrap", ["--variant=minbase", "bookworm", rootfs, mirror]);
    // As the official image has them: node and npm in /usr/local, and the node user (uid 1000).
    cpSync(binary, path.join(rootfs, "usr/local/bin/node"));
    cpSync(npmDir, path.join(rootfs, "usr/local/lib/node_modules/npm"), { recursive: true });
    symlinkSync("../lib/node_modules/npm/bin/npm-cli.js", path.join(rootfs, "usr/local/bin/npm"));
    symlinkSync("../lib/node_modules/npm/bin/npx-cli.js", path.join(rootfs, "usr/local/bin/npx"));
    run("chroot", [rootfs, "groupadd", "--gid", "1000", "node"]);
    run("chroot", [rootfs, "useradd", "--uid", "1000", "--gid", "node", "--shell", "/bin/bash", "--create-home", "node"]);
    for (const dir of ["var/cache/apt/archives", "var/lib/apt/lists"]) {
      for (const entry of readdirSync(path.join(rootfs, dir)))
        if (entry !== "partial" && entry !== "lock") rmSync(path.join(rootfs, dir, entry), { force: true });
    }
    const tar = spawn("tar", ["--numeric-owner", "-C", rootfs, "-c", "."], { stdio: ["ignore", "pipe", "inherit"] });
    const tarDone = new Promise<number | null>((resolve) => tar.on("close", resolve));
    await podmanOk(
      [
        "import",
        "--change",
        `LABEL ${NODE_LABEL}=${process.version}`,
        "--change",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change",
        `ENV NODE_VERSION=${process.version.slice(1)}`,
        "--change",
        'CMD ["node"]',
        "-",
        name,
      ],
      { input: tar.stdout, timeoutMs: 600_000 },
    );
    if ((await tarDone) !== 0) throw new Error("tar of the base image's root file system failed");
    return "made";
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}
