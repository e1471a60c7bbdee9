// Makes files genuinely unwritable for this process. Tests run as root here, and file modes do not
// stop root: root makes them immutable (chattr +i; even root cannot write them, checked on a
// scratch file before use); a normal user chmods them.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export const isRoot = process.getuid?.() === 0;

/** root: chattr +i, after checking on a scratch file that it really stops a write here. */
function immutableWorks(): boolean {
  if (!isRoot) return false;
  const dir = mkdtempSync(path.join(tmpdir(), "mab-chattr-"));
  const file = path.join(dir, "probe");
  writeFileSync(file, "x");
  try {
    if (spawnSync("chattr", ["+i", file]).status !== 0) return false;
    try {
      closeSync(openSync(file, "r+"));
      return false;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === "EPERM";
    } finally {
      spawnSync("chattr", ["-i", file]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
export const mechanism: "chattr" | "chmod" | undefined = isRoot ? (immutableWorks() ? "chattr" : undefined) : "chmod";

/** Makes files unwritable for this process by `mechanism`; returns the undo. */
export function makeUnwritable(paths: string[]): () => void {
  const files = paths.filter((f) => existsSync(f));
  if (mechanism === "chattr") {
    execFileSync("chattr", ["+i", ...files]);
    return () => execFileSync("chattr", ["-i", ...files]);
  }
  for (const f of files) chmodSync(f, 0o444);
  return () => {
    for (const f of files) chmodSync(f, 0o644);
  };
}
