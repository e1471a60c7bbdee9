// DATABASE_URL: which database the broker keeps its state in (a SQLite file by default).
import { z } from "zod";
import { databaseKindOf, type DatabaseKind } from "./database-kind.ts";
import { parseVar } from "./parse-var.ts";
import type { Env } from "./values.ts";

export function parseDatabase(env: Env): { readonly databaseUrl: string; readonly databaseKind: DatabaseKind } {
  const databaseUrl =
    parseVar(
      env,
      "DATABASE_URL",
      z
        .string()
        .regex(/^(file:.+|postgres(ql)?:\/\/.+)$/i)
        .optional(),
      "a SQLite file URL (file:./data/broker.db) or a PostgreSQL URL (postgresql://user:pass@host:5432/db)",
    ) ?? "file:./data/broker.db";
  return { databaseUrl, databaseKind: databaseKindOf(databaseUrl) };
}
