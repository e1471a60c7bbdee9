// The audit stream (AUDIT_SINK): a loop that takes the pending events from the audit trail, oldest
// first, sends them to the target as one batch of JSON lines, and marks them delivered once the
// target took them. A failed batch is sent again, whole, after a wait that doubles up to a cap: at
// least once, in order, and nothing lost across a restart (the backlog is the trail itself,
// grants/audit-outbox.ts). Several instances on one database each send the pending events: a
// receiver may then see an event twice, and tells by its id.
import type { Writable } from "node:stream";
import type { AuditSinkConfig } from "../config/observability.ts";
import type { Logger } from "../logger.ts";
import type { AuditOutbox } from "../grants/audit-outbox.ts";
import { auditJson } from "../grants/audit-log.ts";
import { fileTarget, stdoutTarget, webhookTarget, type AuditTarget } from "./targets.ts";

export interface AuditSinkTiming {
  /** How often the trail is read for new events (default 1 s). */
  readonly pollMs?: number;
  /** The first wait after a failed batch; each further failure doubles it (default 1 s)... */
  readonly retryMs?: number;
  /** ...up to this (default 5 minutes). */
  readonly maxRetryMs?: number;
  /** Events per batch (default 100). */
  readonly batchSize?: number;
}

export interface AuditSinkOptions extends AuditSinkTiming {
  readonly logger: Logger;
  /** Where `stdout` writes (default the process's). */
  readonly stdout?: Writable;
}

export interface AuditSink {
  start(): void;
  /** Opens the file again before the next batch (SIGHUP, after logrotate moved it). */
  reopen(): void;
  /** Stops sending; a local target (stdout, file) first takes what is pending. Undelivered events stay pending. */
  stop(): Promise<void>;
}

const WEBHOOK_TIMEOUT_MS = 10_000;

function targetFor(config: AuditSinkConfig, options: AuditSinkOptions): AuditTarget {
  switch (config.kind) {
    case "stdout":
      return stdoutTarget(options.stdout ?? process.stdout);
    case "file":
      return fileTarget(config.path);
    case "webhook":
      return webhookTarget(config.url, config.secret, { timeoutMs: WEBHOOK_TIMEOUT_MS });
  }
}

export function createAuditSink(config: AuditSinkConfig, outbox: AuditOutbox, options: AuditSinkOptions): AuditSink {
  const target = targetFor(config, options);
  const pollMs = options.pollMs ?? 1000;
  const retryMs = options.retryMs ?? 1000;
  const maxRetryMs = options.maxRetryMs ?? 5 * 60_000;
  const batchSize = options.batchSize ?? 100;
  const local = config.kind !== "webhook";
  const log = options.logger;

  let stopping = false;
  let inFlight = new AbortController();
  let wake: (() => void) | undefined;
  let loop: Promise<void> | undefined;

  /** Resolves after `ms`, or at once when the sink stops. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (stopping) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  /** Sends one batch; how many events it held (0: nothing was pending). */
  async function sendBatch(): Promise<number> {
    const events = await outbox.pending(batchSize);
    if (events.length === 0) return 0;
    const lines = events.map((e) => `${JSON.stringify(auditJson(e))}\n`).join("");
    await target.deliver(lines, inFlight.signal);
    await outbox.delivered(
      events.map((e) => e.id),
      new Date(),
    );
    return events.length;
  }

  async function run(): Promise<void> {
    let failures = 0;
    while (!stopping) {
      let sent: number;
      try {
        sent = await sendBatch();
      } catch (err) {
        if (stopping) break;
        failures++;
        // Doubling from retryMs, with a tenth of jitter so that instances do not retry in step.
        const wait = Math.min(maxRetryMs, retryMs * 2 ** Math.min(failures - 1, 30)) * (0.9 + Math.random() * 0.1);
        log.warn(
          { sink: target.description, failures, retryInMs: Math.round(wait), err: (err as Error).message },
          "audit sink: delivery failed; the events stay pending and are sent again",
        );
        await pause(wait);
        continue;
      }
      if (failures > 0) log.info({ sink: target.description, failures }, "audit sink: delivering again");
      failures = 0;
      // A full batch means more may be waiting: no pause before the next.
      if (sent < batchSize) await pause(pollMs);
    }
    // What is pending goes out before a local target closes: nothing there to wait for.
    if (local) {
      try {
        while ((await sendBatch()) === batchSize);
      } catch (err) {
        log.warn({ sink: target.description, err: (err as Error).message }, "audit sink: events left pending at shutdown");
      }
    }
    await target.close();
  }

  return {
    start() {
      if (loop) return;
      log.info({ sink: target.description }, "audit sink: sending audit events");
      loop = run();
    },
    reopen() {
      target.reopen();
      log.info({ sink: target.description }, "audit sink: reopening the file");
    },
    async stop() {
      stopping = true;
      inFlight.abort(new Error("the broker is stopping"));
      inFlight = new AbortController();
      wake?.();
      await loop;
    },
  };
}
