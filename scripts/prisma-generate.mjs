// prepare (npm install and npm ci in a checkout; never when the package is installed, whose dist/
// carries the clients compiled): generates both Prisma clients (SQLite and PostgreSQL). Nothing is
// downloaded: the generator with engineType "client" needs no Rust engine.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const prisma = path.join(root, "node_modules/prisma/build/index.js");
// The config picks its adapter from DATABASE_URL; each schema needs the matching one, or the CLI
// falls back to the library engine and tries a download. No connection is made by generate.
const urls = { sqlite: "file:./data/broker.db", postgres: "postgresql://127.0.0.1:1/generate-only" };
for (const db of ["sqlite", "postgres"]) {
  const result = spawnSync(process.execPath, [prisma, "generate", "--schema", `prisma/${db}/schema.prisma`], {
    cwd: root,
    stdio: "inherit",
    // CHECKPOINT_DISABLE: no report to checkpoint.prisma.io from an install.
    env: { ...process.env, DATABASE_URL: urls[db], PRISMA_HIDE_UPDATE_MESSAGE: "1", CHECKPOINT_DISABLE: "1" },
  });
  if (result.status !== 0) {
    console.error(`prisma generate failed for prisma/${db}/schema.prisma`);
    process.exit(result.status ?? 1);
  }
}
