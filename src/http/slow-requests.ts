// Limits on clients that send their request body slowly (slowloris-style uploads): how long a body
// may take, the least upload rate of a streamed /mcp body, and how many bodies one client address
// may have in flight at once. One set of limits and one count per Koa application (so the OAuth
// endpoints and /mcp share them, and two brokers in one process do not), looked up from ctx.app.
import { isIPv6 } from "node:net";
import type Koa from "koa";

export interface SlowClientLimits {
  /**
   * The whole body of an OAuth request, and the body of an /mcp request (its first
   * SMALL_BODY_BYTES when larger) before the MCP server is contacted, must arrive within this
   * time of the server starting to read it. Else 408 and the connection is closed.
   */
  readonly bodyDeadlineMs: number;
  /** A streamed /mcp upload must bring at least this many bytes per second... */
  readonly minUploadBytesPerSecond: number;
  /** ...in every window of this length. */
  readonly rateWindowMs: number;
  /** Requests from one client address (an IPv6 /64) that may be receiving their body at once. */
  readonly maxReceivingPerIp: number;
}

export const DEFAULT_SLOW_CLIENT_LIMITS: SlowClientLimits = {
  bodyDeadlineMs: 10_000,
  minUploadBytesPerSecond: 1024,
  rateWindowMs: 5_000,
  maxReceivingPerIp: 32,
};

interface AppSlowClients {
  limits: SlowClientLimits;
  readonly receiving: Map<string, number>;
}

const perApp = new WeakMap<object, AppSlowClients>();

function of(app: Koa): AppSlowClients {
  let entry = perApp.get(app);
  if (!entry) {
    entry = { limits: DEFAULT_SLOW_CLIENT_LIMITS, receiving: new Map() };
    perApp.set(app, entry);
  }
  return entry;
}

/** Changes the limits of one application (tests use short deadlines); unnamed limits keep their value. */
export function setSlowClientLimits(app: Koa, limits: Partial<SlowClientLimits>): void {
  const entry = of(app);
  entry.limits = { ...entry.limits, ...limits };
}

export function slowClientLimits(app: Koa): SlowClientLimits {
  return of(app).limits;
}

/**
 * The address a limit counts against: IPv4 as is (an IPv4-mapped IPv6 address as its IPv4), IPv6
 * by its /64, the smallest block one subscriber is usually given.
 */
export function clientKey(ip: string): string {
  if (!ip.includes(":")) return ip;
  const lower = ip.toLowerCase();
  if (lower.startsWith("::ffff:") && lower.includes(".")) return lower.slice(7);
  if (!isIPv6(lower)) return lower;
  const [left, right = ""] = lower.split("::");
  const head = left ? left.split(":") : [];
  const tail = lower.includes("::") && right ? right.split(":") : [];
  const groups = lower.includes("::") ? [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail] : head;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ""))
    .join(":")}::/64`;
}

/**
 * Takes one of `ctx.ip`'s places for a body in flight. Returns the function that gives it back
 * (idempotent), or undefined when the address has no place left: the caller answers 429 with
 * `retryAfterSeconds(ctx.app)`.
 */
export function admitReceiving(ctx: Koa.Context): (() => void) | undefined {
  const entry = of(ctx.app);
  const key = clientKey(ctx.ip);
  const count = entry.receiving.get(key) ?? 0;
  if (count >= entry.limits.maxReceivingPerIp) return undefined;
  entry.receiving.set(key, count + 1);
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    const left = (entry.receiving.get(key) ?? 1) - 1;
    if (left > 0) entry.receiving.set(key, left);
    else entry.receiving.delete(key);
  };
}

/** How many bodies from `ip` (its /64 for IPv6) are being received now. */
export function receivingCount(app: Koa, ip: string): number {
  return of(app).receiving.get(clientKey(ip)) ?? 0;
}

/** Retry-After for a refused body: by then the bodies in flight have arrived or been cut. */
export function retryAfterSeconds(app: Koa): number {
  return Math.max(1, Math.ceil(of(app).limits.bodyDeadlineMs / 1000));
}

export const TOO_MANY_BODIES = "Too many requests from this address are still sending their body; retry later.";
