// Which database a DATABASE_URL names. Its own module, free of the database drivers, so that the
// configuration (config/database.ts) and the Prisma CLI configuration can ask without loading them.
export type DatabaseKind = "sqlite" | "postgres";

/** `postgres://…` or `postgresql://…` is PostgreSQL; anything else (a `file:` URL) is SQLite. */
export function databaseKindOf(url: string): DatabaseKind {
  return /^postgres(ql)?:\/\//i.test(url) ? "postgres" : "sqlite";
}
