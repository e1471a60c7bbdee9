// Podman as it works on this machine kind (no daemon, no image registry): Debian's podman with the
// runc runtime (crun cannot set RLIMIT_NOFILE here), no default ulimits, and the host's network.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export interface Result {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

// No default ulimits: runc cannot raise RLIMIT_NOFILE here. A file of this process's own.
const confDir = mkdtempSync(path.join(tmpdir(), "mab-podman-"));
const containersConf = path.join(confDir, "containers.conf");
writeFileSync(containersConf, "[containers]\ndefault_ulimits = []\n");
process.once("exit", () => rmSync(confDir, { recursive: true, force: true }));

const hasCommand = (tool: string) => () => spawnSync("sh", ["-c", `command -v ${tool} || test -x /usr/sbin/${tool}`]).status === 0;

/**
 * Installs from Debian the packages this check needs and lacks (needs root, as podman here does):
 * podman, runc, debootstrap, and `extra` (package name → whether it is there).
 */
export function ensureTools(extra: Record<string, () => boolean> = {}): void {
  const wanted: Record<string, () => boolean> = { podman: hasCommand("podman"), runc: hasCommand("runc"), debootstrap: hasCommand("debootstrap"), ...extra };
  const missing = Object.entries(wanted)
    .filter(([, present]) => !present())
    .map(([name]) => name);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) throw new Error(`${missing.join(", ")} missing: install with apt-get install -y ${missing.join(" ")} (as root)`);
  console.log(`installing ${missing.join(" ")} from Debian…`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [
    ["update", "-qq"],
    ["install", "-y", "-qq", ...missing],
  ]) {
    const result = spawnSync("apt-get", args, { env, stdio: "inherit" });
    if (result.status !== 0) throw new Error(`apt-get ${args.join(" ")} failed`);
  }
}

function podmanArgs(args: readonly string[]): string[] {
  return ["--runtime", "runc", ...args];
}

function podmanEnv(): NodeJS.ProcessEnv {
  return { ...process.env, CONTAINERS_CONF: containersConf };
}

/**
 * Runs `podman <args>` to its end. `show`: stream its output here as it comes (long builds);
 * `input`: what it reads on stdin.
 */
export function podman(args: readonly string[], options: { show?: boolean; input?: NodeJS.ReadableStream; timeoutMs?: number } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn("podman", podmanArgs(args), { env: podmanEnv(), stdio: [options.input ? "pipe" : "ignore", "pipe", "pipe"] });
    if (options.input && child.stdin) options.input.pipe(child.stdin);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (options.show) process.stdout.write(d);
    });
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
      if (options.show) process.stderr.write(d);
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`podman ${args.join(" ")} did not finish in ${options.timeoutMs} ms`));
    }, options.timeoutMs ?? 120_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** `podman <args>`, failing with its output unless it exits 0; resolves to its trimmed stdout. */
export async function podmanOk(args: readonly string[], options: { show?: boolean; input?: NodeJS.ReadableStream; timeoutMs?: number } = {}): Promise<string> {
  const result = await podman(args, options);
  if (result.code !== 0) throw new Error(`podman ${args.join(" ")} exited ${result.code}:\n${result.stdout}${result.stderr}`);
  return result.stdout.trim();
}

export async function imageExists(name: string): Promise<boolean> {
  return (await podman(["image", "exists", name])).code === 0;
}
