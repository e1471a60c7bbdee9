import { describe, expect, it } from "@jest/globals";
import { createMemorySessionBinding, sessionOwnerKey } from "../../src/gateway/session-binding.ts";

describe("MCP session binding (in memory)", () => {
  it("keys sessions by user, or by client when there is no user", () => {
    expect(sessionOwnerKey({ subject: "github:42", clientId: "c1" })).toBe("github:42");
    expect(sessionOwnerKey({ subject: null, clientId: "c1" })).toBe("client:c1");
  });

  it("lets the first claim win and releases on demand", async () => {
    const binding = createMemorySessionBinding();
    expect(await binding.ownerOf("s1")).toBeUndefined();
    expect(await binding.claim("s1", "alice")).toBe("alice");
    expect(await binding.claim("s1", "bob")).toBe("alice");
    expect(await binding.ownerOf("s1")).toBe("alice");
    await binding.release("s1");
    expect(await binding.ownerOf("s1")).toBeUndefined();
    expect(await binding.claim("s1", "bob")).toBe("bob");
  });

  it("is bounded: the least recently used session is forgotten first", async () => {
    const binding = createMemorySessionBinding({ maxSessions: 2 });
    await binding.claim("a", "u");
    await binding.claim("b", "u");
    await binding.ownerOf("a");
    await binding.claim("c", "u");
    expect(await binding.ownerOf("a")).toBe("u");
    expect(await binding.ownerOf("b")).toBeUndefined();
    expect(await binding.ownerOf("c")).toBe("u");
  });

  it("forgets sessions unused for the idle time; use keeps them", async () => {
    let now = 1_000;
    const binding = createMemorySessionBinding({ idleTtlMs: 100, clock: { now: () => now } });
    await binding.claim("busy", "u");
    await binding.claim("idle", "u");
    now += 60;
    await binding.ownerOf("busy");
    now += 60;
    expect(await binding.ownerOf("busy")).toBe("u");
    expect(await binding.ownerOf("idle")).toBeUndefined();
  });
});
