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

/** The loop's settings, the options' defaults applied. */
interface SinkSettings {
  readonly target: AuditTarget;
  readonly outbox: AuditOutbox;
  readonly pollMs: number;
  readonly retryMs: number;
  readonly maxRetryMs: number;
  readonly batchSize: number;
  /** stdout or a file: nothing to wait for, so what is pending goes out before it closes. */
  readonly local: boolean;
  readonly log: Logger;
}

/** Sends one batch; how many events it held (0: nothing was pending). */
async function sendBatch(s: SinkSettings, signal: AbortSignal): Promise<number> {
  const events = await s.outbox.pending(s.batchSize);
  if (events.length === 0) return 0;
  const lines = events.map((e) => `${JSON.stringify(auditJson(e))}\n`).join("");
  await s.target.deliver(lines, signal);
  await s.outbox.delivered(
    events.map((e) => e.id),
    new Date(),
  );
  return events.length;
}

/** The wait after the `failures`-th failure in a row. */
function retryWait(s: SinkSettings, failures: number): number {
  // Doubling from retryMs, with a tenth of jitter so that instances do not retry in step.
  return Math.min(s.maxRetryMs, s.retryMs * 2 ** Math.min(failures - 1, 30)) * (0.9 + Math.random() * 0.1);
}

/** The sending loop and what stops it: the batch in flight is aborted, a pause ends at once. */
class SinkLoop implements AuditSink {
  private stopping = false;
  private inFlight = new AbortController();
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(private readonly s: SinkSettings) {}

  start(): void {
    if (this.loop) return;
    this.s.log.info({ sink: this.s.target.description }, "audit sink: sending audit events");
    this.loop = this.run();
  }

  reopen(): void {
    this.s.target.reopen();
    this.s.log.info({ sink: this.s.target.description }, "audit sink: reopening the file");
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.inFlight.abort(new Error("the broker is stopping"));
    this.inFlight = new AbortController();
    this.wake?.();
    await this.loop;
  }

  /** Resolves after `ms`, or at once when the sink stops. */
  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.stopping) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private async run(): Promise<void> {
    const { s } = this;
    let failures = 0;
    while (!this.stopping) {
      let sent: number;
      try {
        sent = await sendBatch(s, this.inFlight.signal);
      } catch (err) {
        if (this.stopping) break;
        failures++;
        const wait = retryWait(s, failures);
        s.log.warn(
          { sink: s.target.description, failures, retryInMs: Math.round(wait), err: (err as Error).message },
          "audit sink: delivery failed; the events stay pending and are sent again",
        );
        await this.pause(wait);
        continue;
      }
      if (failures > 0) s.log.info({ sink: s.target.description, failures }, "audit sink: delivering again");
      failures = 0;
      // A full batch means more may be waiting: no pause before the next.
      if (sent < s.batchSize) await this.pause(s.pollMs);
    }
    await this.drainLocal();
    await s.target.close();
  }

  /** What is pending goes out before a local target closes: nothing there to wait for. */
  private async drainLocal(): Promise<void> {
    const { s } = this;
    if (!s.local) return;
    try {
      while ((await sendBatch(s, this.inFlight.signal)) === s.batchSize);
    } catch (err) {
      s.log.warn({ sink: s.target.description, err: (err as Error).message }, "audit sink: events left pending at shutdown");
    }
  }
}

export function createAuditSink(config: AuditSinkConfig, outbox: AuditOutbox, options: AuditSinkOptions): AuditSink {
  return new SinkLoop({
    target: targetFor(config, options),
    outbox,
    pollMs: options.pollMs ?? 1000,
    retryMs: options.retryMs ?? 1000,
    maxRetryMs: options.maxRetryMs ?? 5 * 60_000,
    batchSize: options.batchSize ?? 100,
    local: config.kind !== "webhook",
    log: options.logger,
  });
}
