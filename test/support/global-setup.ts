// Jest global setup: one PostgreSQL server for the whole run (when installed).
import { startPostgres, type PostgresServer } from "./postgres.ts";

declare global {
  var __mabPostgres: PostgresServer | null | undefined;
}

export default async function globalSetup(): Promise<void> {
  if (process.env.MAB_TEST_POSTGRES_URL) return;
  const server = await startPostgres();
  globalThis.__mabPostgres = server;
  if (server) process.env.MAB_TEST_POSTGRES_URL = server.baseUrl;
  else process.stdout.write("\n[notice] PostgreSQL server binaries not found: PostgreSQL storage tests will be skipped (install Debian's postgresql package to run them).\n");
}
