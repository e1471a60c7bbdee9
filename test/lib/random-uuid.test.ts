// The request id's UUIDs: version 4 in the RFC 9562 layout, unique across many refills of their
// random buffer, every random digit varying.
import { describe, expect, it } from "@jest/globals";
import { randomUuid } from "../../src/lib/random-uuid.ts";

const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("randomUuid", () => {
  it("makes version-4 UUIDs, all different, over many fills of its random buffer", () => {
    const ids = Array.from({ length: 5_000 }, () => randomUuid());
    for (const id of ids) expect(id).toMatch(V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("varies every digit that is not fixed by the version and variant", () => {
    const ids = Array.from({ length: 2_000 }, () => randomUuid());
    for (let at = 0; at < 36; at++) {
      const seen = new Set(ids.map((id) => id[at]));
      if ([8, 13, 18, 23].includes(at)) expect([...seen]).toEqual(["-"]);
      else if (at === 14) expect([...seen]).toEqual(["4"]);
      else if (at === 19) expect([...seen].sort()).toEqual(["8", "9", "a", "b"]);
      else expect(seen.size).toBe(16);
    }
  });

  it("returns a string of its own: an id handed out earlier does not change", () => {
    const first = randomUuid();
    const copy = `${first}`;
    randomUuid();
    expect(first).toBe(copy);
  });
});
