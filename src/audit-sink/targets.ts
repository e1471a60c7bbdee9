// Where AUDIT_SINK sends the audit events, as JSON lines: stdout, a file (appended to, reopened on
// SIGHUP so logrotate can move it away), or a webhook (each batch one signed POST). A target
// resolves `deliver` only once the lines are written (flushed to disk for a file) or accepted (a
// 2xx answer): only then are the events marked delivered.
import { createHmac } from "node:crypto";
import { open, type FileHandle } from "node:fs/promises";
import type { Writable } from "node:stream";
import { createPooledFetch, type PooledFetch } from "../outbound/pooled-fetch.ts";

export interface AuditTarget {
  /** What the log calls it (never the webhook's query or credentials). */
  readonly description: string;
  /** Writes one batch: JSON lines, each ending with a newline. Rejects when it was not taken. */
  deliver(lines: string, signal: AbortSignal): Promise<void>;
  /** A file target opens its file again before the next batch (after logrotate moved it). */
  reopen(): void;
  close(): Promise<void>;
}

/** The headers of a signed delivery (README, "Audit stream", says how to verify them). */
export const SIGNATURE_HEADER = "x-audit-signature";
export const TIMESTAMP_HEADER = "x-audit-timestamp";

/**
 * `sha256=<hex>` of HMAC-SHA256 with the secret over `<timestamp>.<body>`: the timestamp is signed
 * with the body, so a receiver that refuses old timestamps cannot be fed a recorded delivery again.
 */
export function deliverySignature(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex")}`;
}

export function stdoutTarget(stream: Writable): AuditTarget {
  return {
    description: "stdout",
    deliver: (lines) => new Promise<void>((resolve, reject) => stream.write(lines, (err) => (err ? reject(err) : resolve()))),
    reopen: () => undefined,
    close: async () => undefined,
  };
}

export function fileTarget(path: string): AuditTarget {
  let handle: FileHandle | undefined;
  let reopening = false;
  return {
    description: `file ${path}`,
    async deliver(lines) {
      if (reopening && handle) {
        reopening = false;
        const old = handle;
        handle = undefined;
        await old.close();
      }
      // Created if missing (after logrotate moved it away), owner-only: the events name users and addresses.
      handle ??= await open(path, "a", 0o600);
      await handle.appendFile(lines);
      // On disk before the events are marked delivered: a crash cannot lose what was acknowledged.
      await handle.datasync();
    },
    reopen() {
      reopening = true;
    },
    async close() {
      await handle?.close();
      handle = undefined;
    },
  };
}

export interface WebhookOptions {
  readonly timeoutMs: number;
  /** The HTTP client (default: a pooled one; the address policy refuses cloud metadata addresses). */
  readonly http?: PooledFetch;
  readonly now?: () => number;
}

export function webhookTarget(url: string, secret: string, options: WebhookOptions): AuditTarget {
  const http = options.http ?? createPooledFetch({ allowPrivateNetworks: true, timeoutMs: options.timeoutMs, connectionsPerOrigin: 1 });
  const now = options.now ?? Date.now;
  const shown = new URL(url);
  return {
    description: `webhook ${shown.origin}${shown.pathname}`,
    async deliver(body, signal) {
      // Signed afresh for every attempt: a retry after a long wait carries a current timestamp.
      const timestamp = String(Math.floor(now() / 1000));
      const answer = await http.answer(url, {
        method: "POST",
        headers: {
          "content-type": "application/x-ndjson",
          "user-agent": "mcp-auth-broker (audit sink)",
          [TIMESTAMP_HEADER]: timestamp,
          [SIGNATURE_HEADER]: deliverySignature(secret, timestamp, body),
        },
        body,
        signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs)]),
      });
      if (!answer.ok) throw new Error(`the webhook answered HTTP ${answer.status}`);
    },
    reopen: () => undefined,
    close: () => (options.http ? Promise.resolve() : http.close()),
  };
}
