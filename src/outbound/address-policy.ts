// Which network addresses an outbound fetch of untrusted origin (a Client ID Metadata Document
// named by whoever sends an authorization request) may connect to. Checked on the addresses DNS
// returned, right before the connection is made to exactly those addresses, so a name that
// resolves to the inside (or changes its answer between two lookups) cannot reach it.
import { BlockList, isIP } from "node:net";

/** Never a public web server: loopback, private, link-local, CGNAT, documentation, multicast… */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8], // RFC 1918
  ["100.64.0.0", 10], // RFC 6598 carrier-grade NAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local (cloud metadata lives here)
  ["172.16.0.0", 12], // RFC 1918
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // TEST-NET-1
  ["192.88.99.0", 24], // 6to4 relay anycast
  ["192.168.0.0", 16], // RFC 1918
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // TEST-NET-2
  ["203.0.113.0", 24], // TEST-NET-3
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const)
  PRIVATE.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [
  ["::", 96], // unspecified, loopback (::1), and the deprecated IPv4-compatible ::a.b.c.d (RFC 4291 §2.5.5.1)
  ["64:ff9b:1::", 48], // local-use NAT64
  ["100::", 64], // discard-only
  ["2001::", 32], // Teredo (tunnels to an embedded IPv4 address)
  ["2001:db8::", 32], // documentation
  ["2002::", 16], // 6to4 (embeds an IPv4 address)
  ["fc00::", 7], // unique local (fd00:ec2::254, AWS's IMDS over IPv6, is here)
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
] as const)
  PRIVATE.addSubnet(net, prefix, "ipv6");

/**
 * Cloud instance metadata services: refused even when private networks are allowed, because no
 * client publishes its metadata document there and reaching one hands out the host's credentials.
 */
const METADATA = new BlockList();
for (const ip of ["169.254.169.254", "169.254.170.2", "169.254.169.123", "100.100.100.200", "192.0.0.192"]) METADATA.addAddress(ip, "ipv4");
for (const ip of ["fd00:ec2::254", "fd00:ec2::23"]) METADATA.addAddress(ip, "ipv6");

/**
 * The IPv4 addresses an IPv6 address carries, wherever a host, a translator or a tunnel would take
 * one out and connect to it: IPv4-mapped ::ffff:a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d (SIIT),
 * IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::a.b.c.d, 6to4 2002:AABB:CCDD::/48, and Teredo
 * 2001:0:SSSS:SSSS:…:CCCC:CCCC (server, and the client address with its bits inverted). Each one
 * is checked like the IPv4 address itself: [::7f00:1] is 127.0.0.1 to whatever unwraps it.
 */
function embeddedIpv4s(ipv6: string): string[] {
  const words = expandIpv6(ipv6.toLowerCase().replace(/%.*$/, ""));
  if (!words) return [];
  const v4 = (high: number, low: number) => [high >> 8, high & 0xff, low >> 8, low & 0xff].join(".");
  const zero = (from: number, to: number) => words.slice(from, to).every((w) => w === 0);
  const [w0, w1, w2, w3, w4, w5, w6, w7] = words as [number, number, number, number, number, number, number, number];
  const found: string[] = [];
  if (zero(0, 5) && w5 === 0xffff) found.push(v4(w6, w7)); // mapped
  if (zero(0, 4) && w4 === 0xffff && w5 === 0) found.push(v4(w6, w7)); // translated
  if (zero(0, 6)) found.push(v4(w6, w7)); // compatible (also :: and ::1, which are refused as IPv6 anyway)
  if (w0 === 0x64 && w1 === 0xff9b && zero(2, 6)) found.push(v4(w6, w7)); // NAT64
  if (w0 === 0x2002) found.push(v4(w1, w2)); // 6to4
  if (w0 === 0x2001 && w1 === 0) found.push(v4(w2, w3), v4(w6 ^ 0xffff, w7 ^ 0xffff)); // Teredo server, client
  return found;
}

function expandIpv6(ip: string): number[] | undefined {
  let text = ip;
  // A dotted IPv4 tail (::ffff:127.0.0.1) becomes two 16-bit words.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const missing = 8 - h.length - t.length;
  if (tail === undefined ? missing !== 0 : missing < 0) return undefined;
  const words = [...h, ...Array<string>(tail === undefined ? 0 : missing).fill("0"), ...t].map((w) => Number.parseInt(w, 16));
  return words.length === 8 && words.every((w) => w >= 0 && w <= 0xffff) ? words : undefined;
}

/** `reason` completes "<address> is …". */
export type AddressVerdict = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

/** May an outbound fetch connect to this IP address? */
export function checkAddress(address: string, allowPrivateNetworks: boolean): AddressVerdict {
  const family = isIP(address);
  if (family === 0) return { allowed: false, reason: "not an IP address" };
  const v4s = family === 4 ? [address] : embeddedIpv4s(address);
  if ((family === 6 && METADATA.check(address, "ipv6")) || v4s.some((v4) => METADATA.check(v4, "ipv4"))) {
    return { allowed: false, reason: "a cloud metadata address" };
  }
  if (allowPrivateNetworks) return { allowed: true };
  if ((family === 6 && PRIVATE.check(address, "ipv6")) || v4s.some((v4) => PRIVATE.check(v4, "ipv4"))) {
    return { allowed: false, reason: "a private, loopback or link-local address" };
  }
  return { allowed: true };
}
