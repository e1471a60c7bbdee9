// The audit stream (AUDIT_SINK) from a real broker to what a SIEM or log collector runs: a webhook
// that is down for a while, a file that logrotate moves away, a container's stdout. What it must
// hold: every event arrives at least once, in the order it was recorded, even when the receiver
// fails and the broker restarts in between; the receiver can prove who sent it; nothing carries a
// token, code or secret.
import { afterEach, describe, expect, it } from "@jest/globals";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startBrokerProcess } from "../support/broker-process.ts";
import { obtainTokens, registerClient } from "../support/oauth-flow.ts";
import { until } from "../support/wait.ts";

interface Delivery {
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  readonly status: number;
}

interface AuditLine {
  readonly stream: string;
  readonly id: string;
  readonly at: string;
  readonly type: string;
  readonly clientId: string | null;
  readonly subject: string | null;
}

/** A webhook on 127.0.0.1 that refuses its first `failures` deliveries (503), then accepts them. */
async function startWebhook(failures: number) {
  const deliveries: Delivery[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const status = deliveries.length < failures ? 503 : 204;
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/audit`,
    deliveries,
    /** The events of the accepted deliveries, in the order they were accepted. */
    accepted: (): AuditLine[] =>
      deliveries
        .filter((d) => d.status === 204)
        .flatMap((d) => d.body.split("\n").filter(Boolean))
        .map((line) => JSON.parse(line) as AuditLine),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What the README tells a receiver to do: HMAC-SHA256 over `<timestamp>.<body>`, compared in constant time. */
function signatureValid(secret: string, delivery: Delivery): boolean {
  const timestamp = String(delivery.headers["x-audit-timestamp"]);
  const expected = Buffer.from(`sha256=${createHmac("sha256", secret).update(`${timestamp}.${delivery.body}`).digest("hex")}`);
  const given = Buffer.from(String(delivery.headers["x-audit-signature"]));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** The ids of every event the broker's trail holds, oldest first. */
async function recordedIds(t: TestBroker): Promise<string[]> {
  const events = await t.broker.services.auditLog.read({ since: new Date(0), limit: 100_000 });
  return events.map((e) => e.id);
}

/** (at, id) order, the order the trail records events in. */
function inTrailOrder(lines: readonly AuditLine[]): boolean {
  return lines.every((line, i) => i === 0 || [lines[i - 1]!.at, lines[i - 1]!.id].join(" ") <= [line.at, line.id].join(" "));
}

describe("audit sink", () => {
  it("a webhook that fails its first three deliveries gets every event, in order, signed, across a broker restart", async () => {
    const webhook = await startWebhook(3);
    cleanup.push(webhook.close);
    const secret = randomBytes(32).toString("base64url");
    const env = { AUDIT_SINK: webhook.url, AUDIT_SINK_SECRET: secret };
    // The first broker tries once, then would wait a minute: it is stopped with its events undelivered.
    const first = await startBroker(env, { auditSink: { pollMs: 20, retryMs: 60_000 } });
    let firstStopped = false;
    cleanup.push(async () => {
      if (!firstStopped) await first.stop();
      rmSync(first.dir, { recursive: true, force: true });
    });
    const before = await obtainTokens(first.url, { user: "audrey" });
    await until(() => webhook.deliveries.length >= 1, "the first (refused) delivery");
    const recordedBefore = await recordedIds(first);
    await first.stop({ keepDir: true });
    firstStopped = true;
    expect(webhook.accepted()).toEqual([]);

    // The same database under a new broker: the pending events go out once the webhook accepts.
    const second = await startBroker({ ...env, DATABASE_URL: first.broker.config.databaseUrl }, { auditSink: { pollMs: 20, retryMs: 10, maxRetryMs: 40 } });
    cleanup.push(() => second.stop());
    const after = await obtainTokens(second.url, { user: "audrey" });
    const recorded = await recordedIds(second);
    expect(recorded).toEqual(expect.arrayContaining(recordedBefore));
    await until(() => recorded.every((id) => webhook.accepted().some((e) => e.id === id)), "every recorded event at the webhook");

    const accepted = webhook.accepted();
    expect(webhook.deliveries.filter((d) => d.status === 503)).toHaveLength(3);
    expect(inTrailOrder(accepted)).toBe(true);
    expect(accepted.map((e) => e.type)).toEqual(expect.arrayContaining(["client.registered", "consent.approved", "login.completed", "token.issued"]));
    expect(accepted.every((e) => e.stream === "audit")).toBe(true);
    for (const delivery of webhook.deliveries) {
      expect(delivery.headers["content-type"]).toBe("application/x-ndjson");
      expect(signatureValid(secret, delivery)).toBe(true);
      // Signed with a current timestamp, so a receiver can refuse old ones (replays).
      expect(Math.abs(Number(delivery.headers["x-audit-timestamp"]) - Date.now() / 1000)).toBeLessThan(600);
    }
    // A different secret does not verify: the check can fail.
    expect(signatureValid(`${secret}x`, webhook.deliveries[0]!)).toBe(false);
    const everything = webhook.deliveries.map((d) => d.body).join("\n");
    for (const token of [before.tokens.access_token, before.tokens.refresh_token, after.tokens.access_token, after.tokens.refresh_token, secret])
      expect(everything).not.toContain(token);
    expect(everything).not.toMatch(/mab_(at|rt|ac)_/);
  });

  it("a file sink appends JSON lines, and after the file is moved away and reopened writes a new file", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-audit-file-"));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, "audit.log");
    const t = await startBroker({ AUDIT_SINK: `file:${file}` }, { auditSink: { pollMs: 20 } });
    cleanup.push(() => t.stop());
    const lines = (f: string) => (existsSync(f) ? readFileSync(f, "utf8").split("\n").filter(Boolean) : []).map((l) => JSON.parse(l) as AuditLine);

    const one = await registerClient(t.url);
    await until(() => lines(file).some((e) => e.type === "client.registered" && e.clientId === one.client_id), "the first registration in the file");
    renameSync(file, `${file}.1`);
    // What logrotate's postrotate does, through the hook SIGHUP calls.
    t.broker.reopenAuditSink();
    const two = await registerClient(t.url);
    await until(() => lines(file).some((e) => e.clientId === two.client_id), "the second registration in the new file");
    expect(lines(`${file}.1`).some((e) => e.clientId === two.client_id)).toBe(false);
    expect(lines(file).some((e) => e.clientId === one.client_id)).toBe(false);
  });

  it("the running process reopens its audit file on SIGHUP and keeps serving", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-audit-hup-"));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, "audit.log");
    const broker = await startBrokerProcess(dir, { AUDIT_SINK: `file:${file}` });
    cleanup.push(() => broker.kill());
    const has = (f: string, clientId: string) => existsSync(f) && readFileSync(f, "utf8").includes(`"clientId":${JSON.stringify(clientId)}`);

    const one = await registerClient(broker.url);
    await until(() => has(file, one.client_id), "the first registration in the file");
    renameSync(file, `${file}.1`);
    broker.child.kill("SIGHUP");
    const two = await registerClient(broker.url);
    await until(() => has(file, two.client_id), "the second registration in the reopened file");
    expect(has(`${file}.1`, two.client_id)).toBe(false);
    expect(broker.child.exitCode).toBeNull();
  });

  it("a stdout sink writes one JSON object per line", async () => {
    let written = "";
    const stdout = new Writable({
      write(chunk: Buffer, _encoding, done) {
        written += chunk.toString();
        done();
      },
    });
    const t = await startBroker({ AUDIT_SINK: "stdout" }, { auditSink: { pollMs: 20, stdout } });
    cleanup.push(() => t.stop());
    const client = await registerClient(t.url);
    await until(() => written.includes(client.client_id), "the registration on stdout");
    const lines = written.split("\n").filter(Boolean);
    const events = lines.map((line) => JSON.parse(line) as AuditLine);
    expect(events.find((e) => e.clientId === client.client_id)).toMatchObject({ stream: "audit", type: "client.registered" });
    for (const e of events) expect(new Date(e.at).toISOString()).toBe(e.at);
  });
});
