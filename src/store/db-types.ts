// The one Prisma client type the code sees, for both databases (prisma/postgres is derived from
// prisma/sqlite, so their clients agree), apart from db.ts so that modules db.ts itself uses can
// name it without a circle.
import type { PrismaClient as SqliteClient, Prisma } from "./generated/sqlite/client.ts";

export type Db = SqliteClient;
export type { Prisma };
/** The client inside an interactive transaction (`db.$transaction(async (tx) => …)`). */
export type Tx = Prisma.TransactionClient;

/** A row of a table as Prisma reads it (for code that passes rows around). */
export type AuthTransactionRow = Awaited<ReturnType<Db["authTransaction"]["findUniqueOrThrow"]>>;
export type AccountLoginRow = Awaited<ReturnType<Db["accountLogin"]["findUniqueOrThrow"]>>;
export type ConnectionRow = Awaited<ReturnType<Db["connection"]["findUniqueOrThrow"]>>;
export type ConnectAttemptRow = Awaited<ReturnType<Db["connectAttempt"]["findUniqueOrThrow"]>>;
