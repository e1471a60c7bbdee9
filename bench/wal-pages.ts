// Row (w): what one group commit of refresh rotations writes to SQLite's WAL, page by page. The
// cost of a commit follows the pages it dirties (each is written whole and
// fsynced), and unlike CPU time on this machine the count does not vary between runs. On a copy of
// row (d)'s database, after its rounds: the chains' grants, their tokens and audit trail as the
// broker left them. Each commit runs the broker's own group commit (sqlite-group-commit.ts) on
// rotations built as the refresh grant builds them, with checkpoints off so that every frame stays
// in the WAL; then each frame's page is matched to the table or index that owns it (dbstat).
import { closeSync, copyFileSync, existsSync, fdatasyncSync, openSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { mintSecret } from "../src/grants/token-format.ts";
import type { AccessToken, AuditEvent, RefreshRotation, RefreshToken } from "../src/store/hot-store.ts";
import { commitGroup } from "../src/store/sqlite-group-commit.ts";
import { HotConnection } from "../src/store/sqlite-hot-sql.ts";
import { hotWriteRequest } from "../src/store/sqlite-hot-writes.ts";
import { timeOrderedRowId } from "../src/store/row-id.ts";

/** About the group the refresh rows see (their rounds print ~9 rotations per commit). */
const GROUP = 9;
const COMMITS = 200;
const PAGE_SIZE = 4096;
const FRAME_HEADER = 24;
const WAL_HEADER = 32;

interface Chain {
  readonly grantId: string;
  readonly clientId: string;
  readonly resource: string;
  readonly scope: string;
  current: string;
}

/** The rows of one rotation of `chain`'s current token, as grants/token/refresh-token.ts builds them. */
function rotation(chain: Chain, now: Date): RefreshRotation {
  const common = { grantId: chain.grantId, clientId: chain.clientId, resource: chain.resource, scope: chain.scope, createdAt: now };
  const refreshSecret = mintSecret("refreshToken");
  const accessSecret = mintSecret("accessToken");
  const refresh: RefreshToken = {
    ...common,
    id: timeOrderedRowId(),
    tokenHash: refreshSecret.hash,
    prefix: refreshSecret.prefix,
    parentId: chain.current,
    successorId: null,
    expiresAt: new Date(now.getTime() + 86_400_000),
    consumedAt: null,
    graceUntil: null,
    firstUsedAt: null,
    revokedAt: null,
  };
  const access: AccessToken = {
    ...common,
    id: timeOrderedRowId(),
    tokenHash: accessSecret.hash,
    prefix: accessSecret.prefix,
    refreshTokenId: refresh.id,
    expiresAt: new Date(now.getTime() + 3_600_000),
    revokedAt: null,
  };
  const audit: AuditEvent = {
    id: timeOrderedRowId(),
    at: now,
    type: "token.refreshed",
    clientId: chain.clientId,
    grantId: chain.grantId,
    subject: null,
    ip: null,
    detail: "{}",
    deliveredAt: null,
  };
  return {
    refreshTokenId: chain.current,
    consumedAt: now,
    graceUntil: new Date(now.getTime() + 60_000),
    issued: { refresh, access },
    use: { grantId: chain.grantId, lastUsedAt: now, idleExpiresAt: new Date(now.getTime() + 86_400_000) },
    audit,
  };
}

/** Rows of row (w), from the broker's database file after row (d) (the broker stopped). */
export function walPageRows(databaseFile: string): Array<[string, string]> {
  const copy = path.join(path.dirname(databaseFile), "wal-pages.db");
  const files = (f: string) => [f, `${f}-wal`, `${f}-shm`];
  for (const f of files(copy)) rmSync(f, { force: true });
  copyFileSync(databaseFile, copy);
  // The broker's event-loop connection (synchronous=NORMAL, no automatic checkpoint), its WAL
  // flushed after each commit as wal-flush.ts does (here in this thread, not the thread pool).
  const connection = new HotConnection(copy, { onEventLoop: true });
  let walFd: number | undefined;
  try {
    const db = connection.db();
    const chains = (
      db
        // Each grant's newest token, when still unused: the latest per grant grouped once. As a
        // correlated subquery (grantId has no index) it scanned the table once per row: 2.4 minutes
        // of every run at 36,000 tokens.
        .prepare(`SELECT "r"."id", "r"."grantId", "r"."clientId", "r"."resource", "r"."scope" FROM "RefreshToken" AS "r"
          JOIN (SELECT "grantId", max("createdAt") AS "latest" FROM "RefreshToken" GROUP BY "grantId") AS "m"
            ON "m"."grantId" = "r"."grantId" AND "m"."latest" = "r"."createdAt"
          WHERE "r"."consumedAt" IS NULL AND "r"."revokedAt" IS NULL`)
        .raw(true)
        .all() as string[][]
    ).map(([current, grantId, clientId, resource, scope]) => ({
      current: current!,
      grantId: grantId!,
      clientId: clientId!,
      resource: resource!,
      scope: scope!,
    }));
    if (chains.length < GROUP) return [["(w) WAL pages per group commit", `skipped: ${chains.length} refresh chains in the database, ${GROUP} needed`]];
    const walBytes = () => (existsSync(`${copy}-wal`) ? readFileSync(`${copy}-wal`) : Buffer.alloc(0));
    const before = walBytes().length;
    const cpuBefore = process.cpuUsage();
    let next = 0;
    for (let commit = 0; commit < COMMITS; commit++) {
      const group = Array.from({ length: GROUP }, () => chains[next++ % chains.length]!);
      const rotations = group.map((chain) => rotation(chain, new Date()));
      const outcomes = commitGroup(
        connection,
        rotations.map((r) => hotWriteRequest("rotateRefreshToken", r)),
      );
      for (const [i, outcome] of outcomes.entries()) {
        if (!outcome.ok || outcome.value !== true) throw new Error(`rotation failed: ${JSON.stringify(outcome)}`);
        group[i]!.current = rotations[i]!.issued.refresh.id;
      }
      walFd ??= openSync(`${copy}-wal`, "r");
      fdatasyncSync(walFd);
    }
    const cpu = process.cpuUsage(cpuBefore);
    const wal = walBytes();
    const perFrame = PAGE_SIZE + FRAME_HEADER;
    const owner = new Map((db.prepare(`SELECT "pageno", "name" FROM "dbstat"`).raw(true).all() as [number, string][]).map(([page, name]) => [page, name]));
    const frames = new Map<string, number>();
    let total = 0;
    for (let offset = Math.max(before, WAL_HEADER); offset + perFrame <= wal.length; offset += perFrame) {
      const name = owner.get(wal.readUInt32BE(offset)) ?? "(free or new pages)";
      frames.set(name, (frames.get(name) ?? 0) + 1);
      total++;
    }
    const perCommit = (n: number) => (n / COMMITS).toFixed(1);
    const top = [...frames].sort((a, b) => b[1] - a[1]).slice(0, 6);
    return [
      [
        `(w) WAL pages per group commit of ${GROUP} refresh rotations`,
        `${perCommit(total)} pages (${((total / COMMITS) * 4).toFixed(0)} KB), ${COMMITS} commits on a copy of row (d)'s database (${chains.length} chains); writing them ${((cpu.user + cpu.system) / (COMMITS * GROUP)).toFixed(0)} µs of CPU per rotation (the WAL flushed after each commit)`,
      ],
      ["    by table or index, pages per commit", top.map(([name, n]) => `${name} ${perCommit(n)}`).join(", ")],
    ];
  } finally {
    if (walFd !== undefined) closeSync(walFd);
    connection.close();
    for (const f of files(copy)) rmSync(f, { force: true });
  }
}
