// How many keep-alive connections this process's fetch pool (undici's global dispatcher, which
// Node's fetch uses) holds to each port: a test that stops a server and starts another on the same
// port waits until the pool has seen every old connection end, or its next request goes out on a
// dead socket ("other side closed"). Counted from the dispatcher's own connect/disconnect events.
import { getGlobalDispatcher } from "undici";

const open = new Map<string, number>();
const waiters = new Map<string, Array<() => void>>();

const portOf = (origin: unknown): string => new URL(String(origin)).port;

const dispatcher = getGlobalDispatcher();
dispatcher.on("connect", (origin) => {
  const port = portOf(origin);
  open.set(port, (open.get(port) ?? 0) + 1);
});
dispatcher.on("disconnect", (origin) => {
  const port = portOf(origin);
  const left = Math.max(0, (open.get(port) ?? 0) - 1);
  open.set(port, left);
  if (left > 0) return;
  for (const wake of waiters.get(port) ?? []) wake();
  waiters.delete(port);
});

/** Resolves once the pool holds no connection to `port` (at once when it holds none). */
export function poolConnectionsClosed(port: string | number): Promise<void> {
  const key = String(port);
  if ((open.get(key) ?? 0) === 0) return Promise.resolve();
  return new Promise((resolve) => waiters.set(key, [...(waiters.get(key) ?? []), resolve]));
}
