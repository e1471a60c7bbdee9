// A genuinely full disk for a test: a small tmpfs mounted on a temp folder (as root; a normal user
// cannot mount), filled with a file until the kernel answers ENOSPC. Writes to it then fail as on a
// full production disk (SQLite: SQLITE_FULL), and freeing the file makes room again.
import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, rmdirSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export interface SmallDisk {
  /** The mounted folder. */
  readonly dir: string;
  /** Fills every free byte (a file written until ENOSPC). */
  fill(): void;
  /** Removes the filling: the disk has room again. */
  free(): void;
  unmount(): void;
}

function tryMount(dir: string, megabytes: number): boolean {
  return spawnSync("mount", ["-t", "tmpfs", "-o", `size=${megabytes}m`, "tmpfs", dir]).status === 0;
}

/** Whether this machine lets the tests mount a tmpfs (root, and a kernel or container that allows it). */
export const smallDiskAvailable: boolean = (() => {
  if (process.getuid?.() !== 0) return false;
  const dir = mkdtempSync(path.join(tmpdir(), "mab-disk-probe-"));
  try {
    if (!tryMount(dir, 1)) return false;
    spawnSync("umount", [dir]);
    return true;
  } finally {
    rmdirSync(dir);
  }
})();

export function mountSmallDisk(megabytes: number): SmallDisk {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-disk-"));
  if (!tryMount(dir, megabytes)) throw new Error(`cannot mount a tmpfs on ${dir}`);
  const filler = path.join(dir, "filler");
  return {
    dir,
    fill() {
      const fd = openSync(filler, "a");
      try {
        // Ever smaller writes until not one byte fits.
        for (let size = 64 * 1024; size >= 1; size = Math.floor(size / 2)) {
          const chunk = Buffer.alloc(size);
          for (;;) {
            try {
              writeSync(fd, chunk);
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
              break;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    unmount() {
      spawnSync("umount", ["-l", dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
