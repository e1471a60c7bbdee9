// A throwaway certificate authority and a server certificate it signs, made with node:crypto and a
// few lines of DER (no library, no openssl process): for https servers in tests, whose CA is then
// given to the code under test (an injected `ca`, or NODE_EXTRA_CA_CERTS for a spawned process).
import { createHash, generateKeyPairSync, randomBytes, sign, X509Certificate, type KeyObject } from "node:crypto";
import { isIP } from "node:net";

const tlv = (tag: number, ...content: Buffer[]): Buffer => {
  const body = Buffer.concat(content);
  const n = body.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
};
const seq = (...c: Buffer[]) => tlv(0x30, ...c);
const set = (...c: Buffer[]) => tlv(0x31, ...c);
const oid = (dotted: string): Buffer => {
  const [a, b, ...rest] = dotted.split(".").map(Number) as [number, number, ...number[]];
  const bytes = [40 * a + b];
  for (const v of rest) {
    const out = [v & 0x7f];
    for (let x = v >>> 7; x > 0; x >>>= 7) out.unshift((x & 0x7f) | 0x80);
    bytes.push(...out);
  }
  return tlv(0x06, Buffer.from(bytes));
};
const integer = (bytes: Buffer) => tlv(0x02, bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]));
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.from([unused]), b);
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, "utf8"));
const explicit = (n: number, inner: Buffer) => tlv(0xa0 + n, inner);
const utcTime = (d: Date) => tlv(0x17, Buffer.from(`${d.toISOString().slice(2, 19).replace(/[-T:]/g, "")}Z`));

const ECDSA_SHA256 = seq(oid("1.2.840.10045.4.3.2"));
const name = (cn: string) => seq(set(seq(oid("2.5.4.3"), utf8(cn))));
const extension = (id: string, critical: boolean, value: Buffer) => seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split(".").map(Number));
  const [head, tail = ""] = ip.split("::") as [string, string?];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const words = [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  return Buffer.concat(words.map((w) => Buffer.from([Number.parseInt(w, 16) >> 8, Number.parseInt(w, 16) & 0xff])));
}

function certificate(input: { subject: string; issuer: string; publicKey: KeyObject; signer: KeyObject; extensions: Buffer[] }): string {
  const now = Date.now();
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))),
    // A positive serial whose first byte is never 0: DER wants integers minimal, and OpenSSL
    // refuses a certificate whose serial starts with a padding zero (1 in 512 random serials).
    integer(Buffer.from([0x40 | (randomBytes(1)[0]! & 0x3f), ...randomBytes(11)])),
    ECDSA_SHA256,
    name(input.issuer),
    seq(utcTime(new Date(now - 3600_000)), utcTime(new Date(now + 7 * 24 * 3600_000))),
    name(input.subject),
    input.publicKey.export({ type: "spki", format: "der" }),
    explicit(3, seq(...input.extensions)),
  );
  const der = seq(tbs, ECDSA_SHA256, bits(sign("sha256", tbs, input.signer)));
  return `-----BEGIN CERTIFICATE-----\n${der
    .toString("base64")
    .match(/.{1,64}/g)!
    .join("\n")}\n-----END CERTIFICATE-----\n`;
}

const keyId = (k: KeyObject) =>
  createHash("sha1")
    .update(k.export({ type: "spki", format: "der" }))
    .digest();

export interface TestCa {
  /** The CA certificate (PEM): what the client must trust. */
  readonly caCert: string;
  /** A server certificate for `names` (DNS names and IP addresses) and its key (PEM). */
  issue(names: readonly string[]): { readonly cert: string; readonly key: string };
}

export function createTestCa(): TestCa {
  const ca = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const caCert = certificate({
    subject: "mcp-auth-broker test CA",
    issuer: "mcp-auth-broker test CA",
    publicKey: ca.publicKey,
    signer: ca.privateKey,
    extensions: [
      extension("2.5.29.19", true, seq(bool(true))),
      extension("2.5.29.15", true, bits(Buffer.from([0x06]), 1)), // keyCertSign, cRLSign
      extension("2.5.29.14", false, octets(keyId(ca.publicKey))),
    ],
  });
  return {
    caCert,
    issue(names) {
      const leaf = generateKeyPairSync("ec", { namedCurve: "P-256" });
      const san = seq(...names.map((n) => (isIP(n) ? tlv(0x87, ipBytes(n)) : tlv(0x82, Buffer.from(n, "ascii")))));
      const cert = certificate({
        subject: names[0] ?? "localhost",
        issuer: "mcp-auth-broker test CA",
        publicKey: leaf.publicKey,
        signer: ca.privateKey,
        extensions: [
          extension("2.5.29.19", true, seq()),
          extension("2.5.29.15", true, bits(Buffer.from([0x80]), 7)), // digitalSignature
          extension("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"))), // serverAuth
          extension("2.5.29.17", false, san),
          extension("2.5.29.14", false, octets(keyId(leaf.publicKey))),
          extension("2.5.29.35", false, seq(tlv(0x80, keyId(ca.publicKey)))),
        ],
      });
      // Parses, or the test fails here rather than in a TLS handshake.
      new X509Certificate(cert);
      return { cert, key: leaf.privateKey.export({ type: "pkcs8", format: "pem" }) as string };
    },
  };
}
