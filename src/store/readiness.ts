// Whether a database is usable by the broker at all: reachable and migrated (its tables exist).
import type { Database } from "./db.ts";

/** False when the database cannot be reached or has no schema yet; never throws. */
export async function schemaIsReady(database: Pick<Database, "db">): Promise<boolean> {
  try {
    await database.db.client.findFirst({ select: { id: true } });
    return true;
  } catch {
    return false;
  }
}
