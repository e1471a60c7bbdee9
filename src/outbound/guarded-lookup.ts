// The address policy (address-policy.ts) applied where a connection is made: inside the
// connection's own DNS lookup, so the socket goes to exactly the address that was checked (no
// second lookup an attacker's DNS could answer differently); an IP literal in the URL, for which
// no lookup happens, is checked before anything is sent.
import dns from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { checkAddress, type AddressVerdict } from "./address-policy.ts";
import { OutboundFetchError } from "./fetch-error.ts";

/** The system's name resolution, as a connection's `lookup` option takes it. */
export const systemLookup = dns.lookup as unknown as LookupFunction;

/** A lookup that refuses the whole answer when any address in it is refused. */
export function guardedLookup(base: LookupFunction, allowPrivateNetworks: boolean): LookupFunction {
  return (hostname, options, callback) => {
    base(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "", 0);
      const list = (Array.isArray(addresses) ? addresses : [{ address: addresses as unknown as string, family: 4 }]) as dns.LookupAddress[];
      if (list.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "", 0);
      for (const { address } of list) {
        const verdict = checkAddress(address, allowPrivateNetworks);
        if (!verdict.allowed) {
          return callback(
            new OutboundFetchError("refused-address", `${hostname} resolves to ${address}, ${verdict.reason}: it is not fetched`) as NodeJS.ErrnoException,
            "",
            0,
          );
        }
      }
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      const first = list.find((a) => !options.family || a.family === options.family) ?? list[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/**
 * Verdicts on the IP literals met in URLs, by policy and address: the policy is a pure function of
 * them, and one check costs ~6 µs (net.BlockList makes a SocketAddress per check) on every request
 * to an IdP configured by address. Bounded: emptied when full.
 */
const literalVerdicts = new Map<string, AddressVerdict>();
const MAX_LITERAL_VERDICTS = 256;

function literalVerdict(literal: string, allowPrivateNetworks: boolean): AddressVerdict {
  const key = `${allowPrivateNetworks ? "private" : "public"} ${literal}`;
  let verdict = literalVerdicts.get(key);
  if (!verdict) {
    verdict = checkAddress(literal, allowPrivateNetworks);
    if (literalVerdicts.size >= MAX_LITERAL_VERDICTS) literalVerdicts.clear();
    literalVerdicts.set(key, verdict);
  }
  return verdict;
}

/** Throws when the URL's host is an IP literal the policy refuses (net.connect does no lookup for one). */
export function refuseAddressLiteral(url: URL, allowPrivateNetworks: boolean): void {
  const literal = url.hostname.replace(/^\[|\]$/g, "");
  if (!isIP(literal)) return;
  const verdict = literalVerdict(literal, allowPrivateNetworks);
  if (!verdict.allowed) throw new OutboundFetchError("refused-address", `${literal} is ${verdict.reason}: it is not fetched`);
}
