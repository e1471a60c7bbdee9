// `mcp-auth-broker audit --follow`: an operator watches security events as they happen, like
// `tail -f` on a log, until Ctrl-C. The CLI runs in-process on the broker's database.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { registerClient } from "../support/oauth-flow.ts";
import { spawn } from "node:child_process";
import { cleanEnv, cliBin, runToEnd, waitForOutput } from "../support/spawn.ts";
import { until } from "../support/wait.ts";
import { runCli } from "../../src/cli/program.ts";
import { brokerCliEnv, runCliCaptured } from "../support/cli-in-process.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t?.stop());

/** `audit --follow` running in the background; `stop()` is its Ctrl-C. */
function follow(...args: string[]) {
  const stop = new AbortController();
  let stdout = "";
  let stderr = "";
  const exited = runCli(["audit", "--follow", "--interval", "0.02", ...args], {
    cwd: t.dir,
    env: cleanEnv(brokerCliEnv(t)),
    out: (s) => {
      stdout += s;
    },
    err: (s) => {
      stderr += s;
    },
    stop: stop.signal,
  });
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    async stop() {
      stop.abort();
      return exited;
    },
  };
}

describe("audit --follow", () => {
  it("prints the recent events, then each new one as it is recorded, until stopped", async () => {
    const earlier = await registerClient(t.url);
    const tail = follow();
    try {
      await until(() => tail.stdout().includes(earlier.client_id), "the earlier registration");
      expect(tail.stdout()).toMatch(/^AT +TYPE +USER +CLIENT +IP +DETAIL\n/);
      const later = await registerClient(t.url);
      await until(() => tail.stdout().includes(later.client_id), "the new registration");
      expect(tail.stdout()).toMatch(new RegExp(`client\\.registered +- +${later.client_id}`));
      // Each event once, though the trail is read again and again.
      expect(tail.stdout().split(later.client_id).length - 1).toBe(1);
    } finally {
      expect(await tail.stop()).toBe(0);
    }
    expect(tail.stderr()).toBe("");
  });

  it("with --json prints one JSON object per event and line, as the audit sink sends them", async () => {
    const tail = follow("--json", "--type", "client", "--since", "1m");
    try {
      const client = await registerClient(t.url);
      await until(() => tail.stdout().includes(client.client_id), "the registration");
      const events = tail
        .stdout()
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { stream: string; id: string; type: string; clientId: string });
      expect(events.find((e) => e.clientId === client.client_id)).toMatchObject({ stream: "audit", type: "client.registered" });
      expect(events.every((e) => e.type.startsWith("client."))).toBe(true);
      expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    } finally {
      expect(await tail.stop()).toBe(0);
    }
  });

  it("the binary follows until Ctrl-C (SIGINT), then exits 0", async () => {
    const child = spawn(process.execPath, [cliBin, "audit", "--follow", "--interval", "0.05"], {
      cwd: t.dir,
      env: cleanEnv(brokerCliEnv(t)),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const finished = runToEnd(child);
    const client = await registerClient(t.url);
    await waitForOutput(child, new RegExp(client.client_id));
    child.kill("SIGINT");
    const { code, stderr } = await finished;
    expect(code).toBe(0);
    expect(stderr).toBe("");
  });

  it("refuses a bad --interval as a usage error", async () => {
    const { code, stderr } = await runCliCaptured(["audit", "--follow", "--interval", "never"], {
      cwd: t.dir,
      env: { DATABASE_URL: t.broker.config.databaseUrl },
    });
    expect(code).toBe(2);
    expect(stderr).toContain('--interval "never": give seconds');
  });
});
