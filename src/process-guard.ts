// The last line of defence of a long-running server: an error that escaped every handler (an
// 'error' event nobody listened to, a rejected promise nobody awaited) is logged and the process
// keeps serving. Every such error is a bug to fix; a broker that exits on it would let any client,
// database or IdP fault take the service down for everyone.
import type { Logger } from "./logger.ts";

export interface ProcessGuard {
  /** How many escaped errors were caught since install. */
  readonly caught: () => number;
  uninstall(): void;
}

export function installProcessGuard(logger: Logger, target: NodeJS.Process = process): ProcessGuard {
  let caught = 0;
  const onException = (err: unknown, origin: string) => {
    caught++;
    logger.error({ err, origin }, "unexpected error outside any request; still serving");
  };
  const onRejection = (reason: unknown) => onException(reason, "unhandledRejection");
  target.on("uncaughtException", onException);
  target.on("unhandledRejection", onRejection);
  return {
    caught: () => caught,
    uninstall() {
      target.off("uncaughtException", onException);
      target.off("unhandledRejection", onRejection);
    },
  };
}
