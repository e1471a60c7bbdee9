// The token endpoint against its anchor, node-oidc-provider on SQLite at its fastest sensible
// setting (anchor-provider.ts: WAL, synchronous=NORMAL; the broker answers only once its WAL is on disk), in the same run: rounds alternate between the two servers so that whatever
// else loads the machine weighs on both alike. Refresh: 20 chains, each request using the previous
// answer's refresh token, with client_id and resource as the MCP SDK sends them. Code exchange:
// codes minted beforehand (not timed), exchanged by 20 concurrent clients. Each server's CPU time
// per request comes from /proc, whatever else runs.
import path from "node:path";
import { randomBytes } from "node:crypto";
import { Pool } from "undici";
import { openDatabase } from "../src/store/db.ts";
import { s256Challenge } from "../src/grants/pkce.ts";
import { hashPresentedToken } from "../src/grants/token-format.ts";
import { obtainTokens, registerClient } from "../test/support/oauth-flow.ts";
import { cpuMs, machineCpuMs, startProcess, stop } from "./processes.ts";
import { pairedChange } from "./paired.ts";

const CHAINS = 20;
/** 2,000 requests a round: with 500, a round lasted half a second and /proc's 10 ms ticks weighed. */
const REFRESHES_PER_CHAIN = Number(process.env.BENCH_REFRESHES_PER_CHAIN ?? 100);
const CODES_PER_ROUND = CHAINS * REFRESHES_PER_CHAIN;
/**
 * 7: the rounds of one run spread wide on a shared 2-core machine (refresh 1.41–1.72× the anchor in
 * one run), and with 3 the median moved the row's ratio by a tenth between runs of the same code.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
/** Warm-up rounds run until a round's CPU per request is within this share of the one before. */
const STEADY = 0.1;
/** BENCH_WARM_UP_ROUNDS raises the least (bench/instructions.ts: V8 must be done optimizing before counting). */
const WARM_UP_ROUNDS = { min: Number(process.env.BENCH_WARM_UP_ROUNDS ?? 2), max: Math.max(8, Number(process.env.BENCH_WARM_UP_ROUNDS ?? 0)) };

export interface TokenServer {
  readonly name: string;
  readonly url: string;
  readonly pid: number | undefined;
}

interface Chain {
  readonly clientId: string;
  readonly resource: string;
  refreshToken: string;
}

interface MintedCode {
  readonly code: string;
  readonly verifier: string;
  readonly clientId: string;
  readonly redirectUri: string;
  readonly resource: string;
}

/** The token request that exchanges a minted code, as the MCP SDK sends it. */
function exchangeForm(c: MintedCode): Record<string, string> {
  return {
    grant_type: "authorization_code",
    code: c.code,
    code_verifier: c.verifier,
    redirect_uri: c.redirectUri,
    client_id: c.clientId,
    resource: c.resource,
  };
}

/** One side of the comparison: how to start refresh chains and mint codes on it. */
interface Side {
  readonly server: TokenServer;
  chains(n: number): Promise<Chain[]>;
  codes(n: number): Promise<MintedCode[]>;
}

interface Round {
  readonly perSecond: number;
  /** The whole process's CPU time per request. */
  readonly cpuUsPerRequest: number;
  /** The main thread's (the event loop's) CPU time per request. */
  readonly loopUsPerRequest: number;
  /** Every process's CPU time per request (the database server's, this load generator's...). */
  readonly machineUsPerRequest: number;
  /** This process's (the load generator's) CPU time per request. */
  readonly clientUsPerRequest: number;
  /** The share of the machine's CPU time left idle during the round. */
  readonly idleShare: number;
}

async function post(pool: Pool, form: Record<string, string>): Promise<Record<string, unknown>> {
  const res = await pool.request({
    path: "/token",
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form).toString(),
  });
  const body = (await res.body.json()) as Record<string, unknown>;
  if (res.statusCode !== 200) throw new Error(`/token answered ${res.statusCode}: ${JSON.stringify(body)}`);
  return body;
}

/** Runs `work` with `workers` concurrent clients; the server's rate and CPU per request. */
async function measure(server: TokenServer, requests: number, workers: number, work: (pool: Pool, worker: number) => Promise<void>): Promise<Round> {
  const pool = new Pool(server.url, { connections: workers, pipelining: 1 });
  try {
    const cpuBefore = cpuMs(server.pid);
    const loopBefore = cpuMs(server.pid, true);
    const machineBefore = machineCpuMs();
    const clientBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(Array.from({ length: workers }, (_, w) => work(pool, w)));
    const seconds = (performance.now() - started) / 1000;
    const machine = machineCpuMs();
    const client = process.cpuUsage(clientBefore);
    const busy = machine.busy - machineBefore.busy;
    const idle = machine.idle - machineBefore.idle;
    return {
      perSecond: requests / seconds,
      cpuUsPerRequest: ((cpuMs(server.pid) - cpuBefore) / requests) * 1000,
      loopUsPerRequest: ((cpuMs(server.pid, true) - loopBefore) / requests) * 1000,
      machineUsPerRequest: (busy / requests) * 1000,
      clientUsPerRequest: (client.user + client.system) / requests,
      idleShare: idle / (busy + idle),
    };
  } finally {
    await pool.close();
  }
}

function refreshRound(side: Side, chains: Chain[]): Promise<Round> {
  return measure(side.server, chains.length * REFRESHES_PER_CHAIN, chains.length, async (pool, w) => {
    const chain = chains[w]!;
    for (let i = 0; i < REFRESHES_PER_CHAIN; i++) {
      const body = await post(pool, { grant_type: "refresh_token", refresh_token: chain.refreshToken, client_id: chain.clientId, resource: chain.resource });
      chain.refreshToken = String(body.refresh_token);
    }
  });
}

function codeRound(side: Side, codes: MintedCode[]): Promise<Round> {
  let next = 0;
  return measure(side.server, codes.length, CHAINS, async (pool) => {
    while (next < codes.length) {
      const c = codes[next++]!;
      await post(pool, exchangeForm(c));
    }
  });
}

/** The broker side: chains through the real login flow; codes written to its database as its callback would. */
async function brokerSide(server: TokenServer, databaseUrl: string, cwd: string): Promise<Side & { close(): Promise<void> }> {
  const database = await openDatabase(databaseUrl, cwd);
  const resource = `${server.url}/mcp`;
  return {
    server,
    async chains(n) {
      return Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const { client, tokens } = await obtainTokens(server.url, { user: `chain${i}`, client: await registerClient(server.url) });
          return { clientId: client.client_id, resource, refreshToken: tokens.refresh_token };
        }),
      );
    },
    async codes(n) {
      const client = await registerClient(server.url);
      await obtainTokens(server.url, { user: "coder", client });
      const grant = await database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
      const minted = Array.from({ length: n }, () => {
        const code = `mab_ac_${randomBytes(32).toString("base64url")}`;
        return { code, verifier: randomBytes(32).toString("base64url"), clientId: client.client_id, redirectUri: client.redirect_uri, resource };
      });
      await database.db.authorizationCode.createMany({
        data: minted.map((m) => ({
          id: randomBytes(16).toString("hex"),
          codeHash: hashPresentedToken(m.code),
          grantId: grant.id,
          clientId: m.clientId,
          redirectUri: m.redirectUri,
          codeChallenge: s256Challenge(m.verifier),
          resource,
          scope: grant.scope,
          expiresAt: new Date(Date.now() + 10 * 60 * 1000),
        })),
      });
      return minted;
    },
    close: () => database.close(),
  };
}

/** The anchor side: codes minted by its own models, chains started by exchanging codes. */
function anchorSide(server: TokenServer): Side {
  const codes = async (n: number): Promise<MintedCode[]> => {
    const res = await fetch(`${server.url}/bench/codes?n=${n}`, { method: "POST" });
    const body = (await res.json()) as {
      resource: string;
      client: { client_id: string; redirect_uri: string };
      codes: Array<{ code: string; verifier: string }>;
    };
    return body.codes.map((c) => ({ ...c, clientId: body.client.client_id, redirectUri: body.client.redirect_uri, resource: body.resource }));
  };
  return {
    server,
    codes,
    async chains(n) {
      const pool = new Pool(server.url, { connections: 4 });
      try {
        return await Promise.all(
          (await codes(n)).map(async (c) => {
            const body = await post(pool, exchangeForm(c));
            return { clientId: c.clientId, resource: c.resource, refreshToken: String(body.refresh_token) };
          }),
        );
      } finally {
        await pool.close();
      }
    },
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * Warm-up, not counted: rounds until the server's CPU per request has settled (V8 has compiled
 * the path, statement caches are full). One round of 500 was not enough: on PostgreSQL the broker
 * measured ~790 refreshes/s after it and ~1,200-1,450/s once warm, so the figure was the compile.
 */
async function warmUp(round: () => Promise<Round>): Promise<number> {
  let previous = Number.POSITIVE_INFINITY;
  for (let n = 1; ; n++) {
    const { cpuUsPerRequest } = await round();
    if (n >= WARM_UP_ROUNDS.max || (n >= WARM_UP_ROUNDS.min && Math.abs(cpuUsPerRequest - previous) <= previous * STEADY)) return n;
    previous = cpuUsPerRequest;
  }
}

/**
 * The refresh rate of a running broker alone (median of the rounds after a warm-up), on any
 * database. `counter`, when given, reads a running total (the database's WAL position) before and
 * after the timed rounds; its growth per refresh comes back as `counterPerRequest`.
 */
export async function brokerRefreshRate(
  broker: TokenServer,
  databaseUrl: string,
  dir: string,
  counter?: () => Promise<number>,
): Promise<Round & { readonly counterPerRequest?: number }> {
  const side = await brokerSide(broker, databaseUrl, dir);
  try {
    const chains = await side.chains(CHAINS);
    await warmUp(() => refreshRound(side, chains));
    const rounds: Round[] = [];
    const counted = await counter?.();
    for (let round = 0; round < ROUNDS; round++) rounds.push(await refreshRound(side, chains));
    const counterPerRequest = counter && counted !== undefined ? ((await counter()) - counted) / (ROUNDS * CHAINS * REFRESHES_PER_CHAIN) : undefined;
    return {
      ...(counterPerRequest === undefined ? {} : { counterPerRequest }),
      perSecond: median(rounds.map((r) => r.perSecond)),
      cpuUsPerRequest: median(rounds.map((r) => r.cpuUsPerRequest)),
      loopUsPerRequest: median(rounds.map((r) => r.loopUsPerRequest)),
      machineUsPerRequest: median(rounds.map((r) => r.machineUsPerRequest)),
      clientUsPerRequest: median(rounds.map((r) => r.clientUsPerRequest)),
      idleShare: median(rounds.map((r) => r.idleShare)),
    };
  } finally {
    await side.close();
  }
}

/** A running broker and its database, as the rows below take one. */
export interface RunningBroker {
  readonly server: TokenServer;
  readonly databaseUrl: string;
}

/** This build against another (BENCH_BASELINE), from the rounds both ran in (bench/paired.ts). */
function pairedRows(unit: string, ours: Round[], baseline: Round[]): Array<[string, string]> {
  const paired = (of: (r: Round) => number) => pairedChange(baseline.map(of), ours.map(of));
  return [
    [
      `    against BENCH_BASELINE, CPU per ${unit}: all threads; event loop`,
      `${median(ours.map((r) => r.cpuUsPerRequest)).toFixed(0)} against ${median(baseline.map((r) => r.cpuUsPerRequest)).toFixed(0)} µs, ${paired((r) => r.cpuUsPerRequest)}; ${paired((r) => r.loopUsPerRequest)}`,
    ],
    [`    against BENCH_BASELINE, ${unit}/s`, paired((r) => r.perSecond)],
  ];
}

/**
 * Runs the comparison against a running broker (SQLite); returns the report's rows. With
 * `baseline` (a broker built from other code), it runs in every round too.
 */
export async function compareTokenGrants(broker: RunningBroker, dir: string, baseline?: RunningBroker): Promise<Array<[string, string]>> {
  const { child, match } = await startProcess(["bench/anchor-provider.ts", path.join(dir, "anchor.db")], {}, /ANCHOR_URL (\S+) (\S+)/);
  const anchorSynchronous = match[2]!;
  const ours = await brokerSide(broker.server, broker.databaseUrl, dir);
  const theirs = baseline ? await brokerSide(baseline.server, baseline.databaseUrl, dir) : undefined;
  const sides: Side[] = [ours, anchorSide({ name: "node-oidc-provider", url: match[1]!, pid: child.pid }), ...(theirs ? [theirs] : [])];
  try {
    const chains = await Promise.all(sides.map((s) => s.chains(CHAINS)));
    // Warm-up, one server after the other: both grants' paths, until the refresh has settled.
    const warmUpRounds: number[] = [];
    for (const [i, side] of sides.entries()) {
      await codeRound(side, await side.codes(CODES_PER_ROUND));
      warmUpRounds.push(await warmUp(() => refreshRound(side, chains[i]!)));
    }
    const refresh: Round[][] = sides.map(() => []);
    const exchange: Round[][] = sides.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      // Every other round in the reverse order: what runs first or last in a round (after the
      // machine idled while codes were minted, say) then weighs on each server alike.
      const order = round % 2 === 0 ? [...sides.keys()] : [...sides.keys()].reverse();
      for (const i of order) refresh[i]!.push(await refreshRound(sides[i]!, chains[i]!));
      const codes = await Promise.all(sides.map((s) => s.codes(CODES_PER_ROUND)));
      for (const i of order) exchange[i]!.push(await codeRound(sides[i]!, codes[i]!));
    }
    const rows: Array<[string, string]> = [];
    const report = (label: string, rounds: Round[][], unit: string) => {
      const [broker, anchor] = rounds.map((r) => ({
        perSecond: median(r.map((x) => x.perSecond)),
        cpu: median(r.map((x) => x.cpuUsPerRequest)),
        loop: median(r.map((x) => x.loopUsPerRequest)),
      }));
      rows.push([label, `broker ${broker!.perSecond.toFixed(0)}/s, node-oidc-provider ${anchor!.perSecond.toFixed(0)}/s`]);
      rows.push([`    ratio broker / node-oidc-provider (${unit}/s)`, `${(broker!.perSecond / anchor!.perSecond).toFixed(2)}×`]);
      rows.push([
        `    server CPU per ${unit}, all threads`,
        `broker ${broker!.cpu.toFixed(0)} µs, node-oidc-provider ${anchor!.cpu.toFixed(0)} µs (${(broker!.cpu / anchor!.cpu).toFixed(2)}×)`,
      ]);
      rows.push([`    of it on the event-loop thread`, `broker ${broker!.loop.toFixed(0)} µs, node-oidc-provider ${anchor!.loop.toFixed(0)} µs`]);
      rows.push([
        `    rounds (broker / anchor, ${unit}/s)`,
        rounds[0]!.map((r, i) => `${r.perSecond.toFixed(0)}/${rounds[1]![i]!.perSecond.toFixed(0)}`).join(", "),
      ]);
    };
    rows.push([`(d) anchor: node-oidc-provider, SQLite WAL, synchronous=${anchorSynchronous}`, "broker: WAL flushed before each answer (as FULL)"]);
    report(`(d) refresh_token grant, ${CHAINS} chains, SQLite (median of ${ROUNDS} alternating rounds)`, refresh, "refresh");
    rows.push([`    warm-up rounds until steady (broker / anchor)`, `${warmUpRounds.slice(0, 2).join(" / ")} of ${CHAINS * REFRESHES_PER_CHAIN} refreshes`]);
    if (theirs) rows.push(...pairedRows("refresh", refresh[0]!, refresh[2]!));
    report(`(h) authorization_code grant, ${CHAINS} clients, SQLite`, exchange, "exchange");
    if (theirs) rows.push(...pairedRows("exchange", exchange[0]!, exchange[2]!));
    return rows;
  } finally {
    await ours.close();
    await theirs?.close();
    await stop(child);
  }
}
