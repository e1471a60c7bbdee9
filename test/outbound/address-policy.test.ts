// The SSRF guard's address policy for IPv6 addresses that carry an IPv4 address: whatever unwraps
// one (the kernel for mapped and compatible forms, a NAT64 translator, a 6to4 relay, a Teredo
// tunnel) connects to that IPv4 address, so it is refused exactly when the IPv4 address would be.
// An attack trial fetched a metadata document from https://[::7f00:1]/x (IPv4-compatible 127.0.0.1).
import { describe, expect, it } from "@jest/globals";
import type dns from "node:dns";
import type { LookupFunction } from "node:net";
import { checkAddress } from "../../src/outbound/address-policy.ts";
import { guardedLookup, refuseAddressLiteral } from "../../src/outbound/guarded-lookup.ts";
import { OutboundFetchError } from "../../src/outbound/fetch-error.ts";

describe("IPv6 forms of private IPv4 addresses", () => {
  it.each([
    ["::7f00:1", "IPv4-compatible 127.0.0.1 (the trial's address)"],
    ["::127.0.0.1", "IPv4-compatible 127.0.0.1, dotted"],
    ["::a00:1", "IPv4-compatible 10.0.0.1"],
    ["::8.8.8.8", "IPv4-compatible, deprecated: nothing public lives there"],
    ["::ffff:127.0.0.1", "IPv4-mapped 127.0.0.1"],
    ["::ffff:0:7f00:1", "IPv4-translated (SIIT) 127.0.0.1"],
    ["::ffff:0:192.168.1.1", "IPv4-translated (SIIT) 192.168.1.1"],
    ["64:ff9b::7f00:1", "NAT64 127.0.0.1"],
    ["64:ff9b::10.1.2.3", "NAT64 10.1.2.3"],
    ["2002:7f00:1::1", "6to4 of 127.0.0.1"],
    ["2002:c0a8:101::1", "6to4 of 192.168.1.1"],
    ["2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo, client 127.0.0.1"],
    ["::", "unspecified"],
    ["::1", "loopback"],
  ])("refuses %s (%s), and allows it only where private networks are", (ip) => {
    expect(checkAddress(ip, false)).toEqual({ allowed: false, reason: "a private, loopback or link-local address" });
    expect(checkAddress(ip, true)).toEqual({ allowed: true });
  });

  it.each([
    ["::a9fe:a9fe", "IPv4-compatible"],
    ["::169.254.169.254", "IPv4-compatible, dotted"],
    ["::ffff:0:a9fe:a9fe", "IPv4-translated"],
    ["64:ff9b::a9fe:a9fe", "NAT64"],
    ["2002:a9fe:a9fe::1", "6to4"],
    ["2001:0:4136:e378:8000:63bf:5601:5601", "Teredo client"],
  ])("refuses 169.254.169.254 as %s (%s) even where private networks are allowed", (ip) => {
    expect(checkAddress(ip, false)).toEqual({ allowed: false, reason: "a cloud metadata address" });
    expect(checkAddress(ip, true)).toEqual({ allowed: false, reason: "a cloud metadata address" });
  });

  it.each(["64:ff9b::808:808", "64:ff9b::1.1.1.1", "::ffff:8.8.8.8", "2606:4700::1111", "2a00:1450:4001:82b::200e"])("allows the public address %s", (ip) => {
    expect(checkAddress(ip, false)).toEqual({ allowed: true });
  });
});

describe("where the guard applies them", () => {
  it("an IP literal in the URL, as the trial wrote it", () => {
    for (const url of ["https://[::7f00:1]/x", "https://[::127.0.0.1]/x", "https://[64:ff9b::7f00:1]/x", "https://[2002:7f00:1::1]/x"]) {
      expect(() => refuseAddressLiteral(new URL(url), false)).toThrow(OutboundFetchError);
    }
    expect(() => refuseAddressLiteral(new URL("https://[64:ff9b::808:808]/x"), false)).not.toThrow();
  });

  it("a name whose DNS answer is one of them", async () => {
    const answer: LookupFunction = (_hostname, _options, callback) =>
      (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, [{ address: "::7f00:1", family: 6 }]);
    const error = await new Promise<Error | null>((resolve) => guardedLookup(answer, false)("docs.example", { all: true }, (err) => resolve(err)));
    expect(error).toBeInstanceOf(OutboundFetchError);
    expect(error!.message).toBe("docs.example resolves to ::7f00:1, a private, loopback or link-local address: it is not fetched");
  });
});
