// `npm run test:container`: builds the image from the Containerfile and runs it for real with podman
// (the slow check; not part of `npm test`). Without an image registry here, the base image is made
// locally first (base-image.ts). What it shows:
//   - the image holds production dependencies only: no dev dependency, no test file, no .env;
//   - demo mode in the image refuses to listen on all interfaces unless told it may;
//   - the demo answers /healthz, its HEALTHCHECK passes, and the MCP SDK client signs in through it;
//   - its process runs as uid 1000, as PID 1 (signals reach the broker itself), and keeps the SQLite
//     database and the generated demo key in the /data volume;
//   - two containers on one PostgreSQL database, configured by secret files (DATABASE_URL_FILE,
//     SECRET_KEY_FILE): a token issued by one works at the other;
//   - `podman stop` (SIGTERM) ends each in under 5 s, exit code 0, even with a client connected.
// Prints each step's time and the image size; removes its containers, volume and database server.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import pg from "pg";
import { findPostgresBin, startPostgres, type PostgresServer } from "../support/global-setup.ts";
import { projectRoot } from "../support/spawn.ts";
import { freePort } from "../support/start-broker.ts";
import { ensureBaseImage } from "./base-image.ts";
import { inspectApp } from "./image-contents.ts";
import { ensureTools, podman, podmanOk } from "./podman.ts";
import { connectWithToken, signIn, whoami } from "./sign-in.ts";

const BASE_IMAGE = "localhost/mab-node20-base";
const IMAGE = "localhost/mcp-auth-broker:test";
const STOP_LIMIT_MS = 5000;
const version = (JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { version: string }).version;

const runId = randomBytes(3).toString("hex");
const containers: string[] = [];
const volumes: string[] = [];
const timings: Array<[string, number]> = [];
const facts: string[] = [];
const work = mkdtempSync(path.join(tmpdir(), "mab-container-"));
let postgres: PostgresServer | null = null;

function fail(message: string): never {
  throw new Error(message);
}

async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  console.log(`\n== ${name}`);
  const started = performance.now();
  const value = await fn();
  const ms = performance.now() - started;
  timings.push([name, ms]);
  console.log(`   done in ${(ms / 1000).toFixed(1)} s`);
  return value;
}

function note(fact: string): void {
  facts.push(fact);
  console.log(`   ${fact}`);
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Starts a container of the image on the host's network; `env` are the broker's settings. */
async function startContainer(role: string, env: Record<string, string>, extra: string[] = []): Promise<string> {
  const name = `mab-ct-${runId}-${role}`;
  containers.push(name);
  const envArgs = Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]);
  await podmanOk(["run", "-d", "--name", name, "--network=host", ...envArgs, ...extra, IMAGE], { timeoutMs: 120_000 });
  return name;
}

/** npm's setting `key` here, if it has one. */
function npmConfig(key: string): string | undefined {
  const value = execFileSync("npm", ["config", "get", key], { encoding: "utf8" }).trim();
  return value && value !== "null" && value !== "undefined" ? value : undefined;
}

async function logsOf(name: string): Promise<string> {
  const result = await podman(["logs", name]);
  return `${result.stdout}${result.stderr}`;
}

/** Waits until `url`/healthz answers 200; fails with the container's log when it exits first. */
async function waitHealthy(name: string, url: string): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined);
    if (res?.status === 200) return;
    const state = await podmanOk(["inspect", "--format", "{{.State.Status}}", name]);
    if (state !== "running") fail(`${name} stopped (${state}) before answering /healthz:\n${await logsOf(name)}`);
    if (Date.now() > deadline) fail(`${name} did not answer ${url}/healthz within 180 s:\n${await logsOf(name)}`);
    await pause(250);
  }
}

/** `podman stop` (the image's STOPSIGNAL), timed; fails over STOP_LIMIT_MS or on a non-zero exit. */
async function stopTimed(name: string): Promise<void> {
  const started = performance.now();
  await podmanOk(["stop", "--time", "10", name], { timeoutMs: 60_000 });
  const ms = performance.now() - started;
  const code = await podmanOk(["inspect", "--format", "{{.State.ExitCode}}", name]);
  note(`${name}: stopped by SIGTERM in ${(ms / 1000).toFixed(2)} s, exit code ${code}`);
  if (code !== "0") fail(`${name} exited ${code} after SIGTERM:\n${await logsOf(name)}`);
  if (ms > STOP_LIMIT_MS) fail(`${name} took ${(ms / 1000).toFixed(2)} s to stop on SIGTERM (limit ${STOP_LIMIT_MS / 1000} s)`);
}

/** The uid and command line of the container's PID 1, read inside it. */
async function pidOne(name: string): Promise<{ uid: number; cmdline: string }> {
  const out = await podmanOk([
    "exec",
    name,
    "node",
    "-e",
    "const fs=require('fs');const uid=/^Uid:\\s+(\\d+)/m.exec(fs.readFileSync('/proc/1/status','utf8'))[1];process.stdout.write(JSON.stringify({uid:Number(uid),cmdline:fs.readFileSync('/proc/1/cmdline','utf8').split('\\0').join(' ')}))",
  ]);
  return JSON.parse(out) as { uid: number; cmdline: string };
}

async function main(): Promise<void> {
  // The throwaway PostgreSQL server comes from Debian's postgresql, as in the test suite.
  ensureTools({ postgresql: () => findPostgresBin() !== null });

  await step(`base image ${BASE_IMAGE}`, async () => note(`${BASE_IMAGE}: ${await ensureBaseImage(BASE_IMAGE, work)}`));

  await step(`podman build ${IMAGE}`, async () => {
    const previous = (await podman(["image", "inspect", "--format", "{{.Id}}", IMAGE])).stdout.trim();
    const registry = npmConfig("registry") ?? fail("npm config get registry printed nothing");
    // A TLS-inspecting proxy between this machine and the registry: its CA goes into the build.
    const cafile = [npmConfig("cafile"), process.env.NODE_EXTRA_CA_CERTS].find((file) => file && existsSync(file));
    const caArgs = cafile ? ["-v", `${cafile}:/run/host-npm-ca.crt:ro`, "--build-arg", "NPM_CAFILE=/run/host-npm-ca.crt"] : [];
    await podmanOk(
      [
        "build",
        // The docker format keeps HEALTHCHECK (the OCI format has no field for it).
        "--format",
        "docker",
        "--network=host",
        "--build-arg",
        `BASE_IMAGE=${BASE_IMAGE}`,
        "--build-arg",
        `NPM_REGISTRY=${registry}`,
        ...caArgs,
        "--build-arg",
        `VERSION=${version}`,
        "-f",
        "Containerfile",
        "-t",
        IMAGE,
        projectRoot,
      ],
      { show: true, timeoutMs: 30 * 60_000 },
    );
    const current = await podmanOk(["image", "inspect", "--format", "{{.Id}}", IMAGE]);
    // The image this tag named before: replaced, so not kept (its layers stay as build cache).
    if (previous && previous !== current) await podman(["rmi", previous]);
  });

  await step("image configuration and contents", async () => {
    const inspect = JSON.parse(await podmanOk(["image", "inspect", IMAGE]))[0] as {
      Size: number;
      Config: {
        User?: string;
        Env?: string[];
        Entrypoint?: string[];
        Cmd?: string[];
        StopSignal?: string;
        Volumes?: Record<string, unknown>;
        Labels?: Record<string, string>;
      };
      Healthcheck?: { Test?: string[] };
    };
    const config = inspect.Config;
    const baseSize = Number(await podmanOk(["image", "inspect", "--format", "{{.Size}}", BASE_IMAGE]));
    note(`image size: ${mib(inspect.Size)} (${inspect.Size} bytes), of which the base image ${mib(baseSize)}`);
    const expect = (ok: boolean, what: string) => ok || fail(`image configuration: ${what}; got ${JSON.stringify(config)}`);
    expect(config.User === "node", "runs as the node user");
    expect(
      JSON.stringify(config.Entrypoint) === '["mcp-auth-broker"]' && JSON.stringify(config.Cmd) === '["serve"]',
      "entrypoint mcp-auth-broker, command serve",
    );
    expect(config.StopSignal === "SIGTERM", "stop signal SIGTERM");
    expect(Object.keys(config.Volumes ?? {}).includes("/data"), "/data is a volume");
    expect(Boolean(inspect.Healthcheck?.Test?.join(" ").includes("/healthz")), "a HEALTHCHECK on /healthz");
    expect(config.Labels?.["org.opencontainers.image.version"] === version, `version label ${version}`);
    expect(config.Labels?.["org.opencontainers.image.licenses"] === "MIT", "licence label MIT");
    for (const e of ["HOST=0.0.0.0", "NODE_ENV=production"]) expect(Boolean(config.Env?.includes(e)), e);
    // Set, it would make DATABASE_URL_FILE a configuration error ("not both").
    expect(!config.Env?.some((e) => e.startsWith("DATABASE_URL=")), "DATABASE_URL unset (the default lands in /data)");

    const rootfs = await podmanOk(["image", "mount", IMAGE]);
    try {
      const { problems, largest } = inspectApp(rootfs);
      if (problems.length > 0) fail(`image contents:\n  ${problems.join("\n  ")}`);
      note("no dev dependency, no test file, no .env, no sources but the one the Prisma config reads");
      note(`largest packages: ${largest.map((p) => `${p.name} ${mib(p.bytes)}`).join(", ")}`);
    } finally {
      await podman(["image", "unmount", IMAGE]);
    }

    const printed = await podmanOk(["run", "--rm", "--network=host", IMAGE, "--version"]);
    if (printed !== version) fail(`mcp-auth-broker --version printed ${JSON.stringify(printed)}, expected ${version}`);
    note(`the entrypoint runs other commands too: --version printed ${printed}`);
  });

  await step("demo mode refuses all interfaces unless allowed", async () => {
    // Nothing configured: the image's HOST=0.0.0.0 with the demo IdP, which lets anyone sign in.
    const refused = await podman(["run", "--rm", "--network=host", IMAGE], { timeoutMs: 120_000 });
    if (refused.code !== 1 || !refused.stderr.includes("DEMO_ALLOW_PUBLIC_HOST"))
      fail(`expected exit 1 naming DEMO_ALLOW_PUBLIC_HOST, got ${refused.code}:\n${refused.stdout}${refused.stderr}`);
    note(`refused with exit 1: ${refused.stderr.trim().split("\n").pop()}`);
  });

  await step("demo mode on SQLite in the /data volume", async () => {
    const volume = `mab-ct-${runId}-data`;
    volumes.push(volume);
    await podmanOk(["volume", "create", volume]);
    const port = await freePort();
    const url = `http://localhost:${port}`;
    // The host's network (this machine kind has no other): loopback is the container's own here.
    const name = await startContainer("demo", { PORT: String(port), HOST: "127.0.0.1" }, ["-v", `${volume}:/data`]);
    await waitHealthy(name, url);
    note(`${url}/healthz answers 200`);

    const health = await podman(["healthcheck", "run", name], { timeoutMs: 60_000 });
    if (health.code !== 0) fail(`the image's HEALTHCHECK failed (${health.code}): ${health.stdout}${health.stderr}`);
    note("the image's HEALTHCHECK passes");

    const pid1 = await pidOne(name);
    if (pid1.uid === 0) fail(`the broker runs as root: ${JSON.stringify(pid1)}`);
    if (!/node .*mcp-auth-broker serve/.test(pid1.cmdline)) fail(`PID 1 is not the broker: ${pid1.cmdline}`);
    note(`PID 1 is the broker (${pid1.cmdline}), uid ${pid1.uid}`);

    const session = await signIn(url, "container-user");
    try {
      if (session.subject !== "demo:container-user") fail(`whoami answered ${JSON.stringify(session.subject)}, expected demo:container-user`);
      note("the MCP SDK client signed in (registration, consent, demo IdP) and called whoami: demo:container-user");

      const mountpoint = await podmanOk(["volume", "inspect", "--format", "{{.Mountpoint}}", volume]);
      const listing = await podmanOk(["exec", name, "ls", "-ln", "/data"]);
      for (const file of ["broker.db", "secret.key"]) {
        if (!new RegExp(`\\s1000\\s+1000\\s.*\\s${file.replace(".", "\\.")}$`, "m").test(listing))
          fail(`/data/${file} missing or not the node user's:\n${listing}`);
      }
      note(`the database and the demo key are in the volume (${mountpoint}), owned by uid 1000`);

      // Stopped with the client still connected (its standalone SSE stream open).
      await stopTimed(name);
    } finally {
      await session.close();
    }
  });

  await step("two containers on one PostgreSQL database", async () => {
    postgres = (await startPostgres()) ?? fail("PostgreSQL server binaries not found after installing postgresql");
    const database = `mab_container_${runId}`;
    const admin = new pg.Client({ connectionString: `${postgres.baseUrl}/postgres` });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    const databaseUrl = `${postgres.baseUrl}/${database}`;

    // The shared key and the database URL as container secrets (as compose.yaml passes them):
    // files readable by the node user only.
    const secrets = path.join(work, "secrets");
    mkdirSync(secrets);
    for (const [name, value] of Object.entries({ secret_key: randomBytes(32).toString("base64"), database_url: databaseUrl })) {
      writeFileSync(path.join(secrets, name), `${value}\n`);
      chownSync(path.join(secrets, name), 1000, 1000);
      chmodSync(path.join(secrets, name), 0o400);
    }
    const [portA, portB] = [await freePort(), await freePort()];
    // One PUBLIC_URL for both, as behind a load balancer: tokens name that resource.
    const publicUrl = `http://localhost:${portA}`;
    const common = { HOST: "127.0.0.1", PUBLIC_URL: publicUrl, DATABASE_URL_FILE: "/run/secrets/database_url", SECRET_KEY_FILE: "/run/secrets/secret_key" };
    const secret = ["-v", `${secrets}:/run/secrets:ro`];
    const a = await startContainer("pg-a", { ...common, PORT: String(portA) }, secret);
    await waitHealthy(a, `http://localhost:${portA}`);
    const b = await startContainer("pg-b", { ...common, PORT: String(portB) }, secret);
    await waitHealthy(b, `http://localhost:${portB}`);
    note(`both answer /healthz (ports ${portA} and ${portB}), one database ${database}`);

    const session = await signIn(`http://localhost:${portA}`, "pg-user");
    try {
      if (session.subject !== "demo:pg-user") fail(`whoami at the first answered ${JSON.stringify(session.subject)}`);
      const anonymous = await fetch(`http://localhost:${portB}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
      });
      if (anonymous.status !== 401) fail(`the second container answered ${anonymous.status} without a token, expected 401`);
      const atB = await connectWithToken(`http://localhost:${portB}`, session.accessToken);
      try {
        const subject = await whoami(atB);
        if (subject !== "demo:pg-user") fail(`whoami at the second answered ${JSON.stringify(subject)}`);
      } finally {
        await atB.close().catch(() => undefined);
      }
      note("a token issued by the first container works at the second (401 there without it)");
    } finally {
      await session.close();
    }
    await stopTimed(b);
    await stopTimed(a);
  });
}

async function cleanUp(): Promise<void> {
  for (const name of containers) await podman(["rm", "-f", "-v", name], { timeoutMs: 60_000 }).catch(() => undefined);
  for (const volume of volumes) await podman(["volume", "rm", "-f", volume]).catch(() => undefined);
  try {
    postgres?.stop();
  } catch {
    // already gone
  }
  rmSync(work, { recursive: true, force: true });
}

const started = performance.now();
let failed: unknown;
try {
  await main();
} catch (err) {
  failed = err;
} finally {
  await cleanUp();
}
console.log("\n== summary");
for (const [name, ms] of timings) console.log(`   ${(ms / 1000).toFixed(1).padStart(7)} s  ${name}`);
for (const fact of facts) console.log(`   - ${fact}`);
console.log(`   total ${((performance.now() - started) / 1000).toFixed(1)} s`);
if (failed) {
  console.error(`\ntest:container FAILED: ${failed instanceof Error ? failed.message : String(failed)}`);
  process.exit(1);
}
console.log("\ntest:container passed");
process.exit(0);
