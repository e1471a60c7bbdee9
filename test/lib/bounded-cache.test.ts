// The broker's in-memory caches hold at most their limit, forgetting the least recently used
// first, and tell their owner what they forget (the access cache unlinks it from its grant).
import { describe, expect, it } from "@jest/globals";
import { boundedCache } from "../../src/lib/bounded-cache.ts";
import { ManualClock } from "../../src/lib/clock.ts";

describe("boundedCache", () => {
  it("keeps at most its limit, forgetting the least recently used, and reports each one it forgets", () => {
    const forgotten: string[] = [];
    const cache = boundedCache<string, number>(3, { dispose: (_value, key, reason) => void forgotten.push(`${key}:${reason}`) });
    for (const [i, key] of ["a", "b", "c"].entries()) cache.set(key, i);
    cache.get("a");
    cache.set("d", 3);
    cache.set("e", 4);
    expect([...cache.keys()].sort()).toEqual(["a", "d", "e"]);
    expect(cache.size).toBe(3);
    expect(forgotten).toEqual(["b:evict", "c:evict"]);
  });

  it("expires entries on the clock it is given", () => {
    const clock = new ManualClock();
    const cache = boundedCache<string, string>(10, { ttl: 1000, perf: clock, ttlResolution: 0 });
    cache.set("s", "owner");
    clock.advance(999);
    expect(cache.get("s")).toBe("owner");
    clock.advance(2);
    expect(cache.get("s")).toBeUndefined();
  });
});
