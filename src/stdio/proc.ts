// What Linux's /proc says about a process: enough to tell whether a pid still names the process
// the broker started (its start time), and whether a process carries the broker's marker in its
// environment. Elsewhere (no /proc) every answer is undefined and callers do nothing they cannot
// verify.
import { readdirSync, readFileSync } from "node:fs";

/** Whether this system has a /proc the functions below can read. */
export const hasProc = ((): boolean => {
  try {
    readFileSync("/proc/self/stat");
    return true;
  } catch {
    return false;
  }
})();

/**
 * The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or undefined
 * when the process does not exist. A pid is reused by the kernel; (pid, start time) is not.
 */
export function startTimeOf(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Field 3 (state) is fields[0], so field 22 is fields[19]. A zombie has exited already.
  if (fields[0] === "Z") return undefined;
  return fields[19];
}

/** Whether the process's environment holds `NAME=value` exactly (false when unreadable). */
export function environmentHas(pid: number, entry: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(entry);
  } catch {
    return false;
  }
}

/** Every pid on the system (an empty list without /proc). */
export function allPids(): number[] {
  try {
    return readdirSync("/proc")
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch {
    return [];
  }
}
