// An LRU cache of at most `limit` entries whose storage grows with what it holds. lru-cache's `max`
// preallocates every slot up front (Array.from of that length: ~19 ms and megabytes for 100,000 on
// this machine); the broker's caches are sized for the busiest day and mostly hold a few entries,
// and a process that starts many brokers (the test suite) paid it on every start. The bound is the
// same: each entry counts as 1 against `maxSize`, and the least recently used goes first.
import { LRUCache } from "lru-cache";

export type BoundedCacheOptions<K extends {}, V extends {}> = Omit<LRUCache.Options<K, V, unknown>, "max" | "maxSize" | "sizeCalculation">;

export function boundedCache<K extends {}, V extends {}>(limit: number, options: BoundedCacheOptions<K, V> = {}): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: limit, sizeCalculation: () => 1 } as LRUCache.Options<K, V, unknown>);
}
