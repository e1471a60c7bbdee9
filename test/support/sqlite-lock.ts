// Another process holding a SQLite file's write lock, for tests of how the broker waits for it.
import { spawn } from "node:child_process";
import { projectRoot } from "./spawn.ts";

/**
 * Another process takes the write lock (BEGIN IMMEDIATE) and releases it after `holdMs` with its
 * own timer: in this process libsql waits for a lock synchronously, so a timer here could not fire.
 * Resolves once the lock is held.
 */
export function holdWriteLock(file: string, holdMs: number): Promise<{ released: Promise<void> }> {
  const script = `
    const Database = require("libsql");
    const db = new Database(process.argv[1]);
    db.exec("BEGIN IMMEDIATE");
    process.stdout.write("locked\\n");
    setTimeout(() => { db.exec("COMMIT"); db.close(); process.stdout.write("released\\n"); }, Number(process.argv[2]));
  `;
  const child = spawn(process.execPath, ["-e", script, file, String(holdMs)], { cwd: projectRoot, stdio: ["ignore", "pipe", "inherit"] });
  const released = new Promise<void>((resolve, reject) =>
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`lock holder exited with ${code}`)))),
  );
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      if (d.toString().includes("locked")) resolve({ released });
    });
    child.on("error", reject);
    released.catch(reject);
  });
}
