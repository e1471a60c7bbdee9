// A random (version 4) UUID as one string allocation. crypto.randomUUID() builds its string from
// 20 concatenated pieces (about 600 bytes of short-lived strings per id); the request id of every
// request is one (bench row (m)). The same random source and the same buffering of it as
// randomUUID (one fill for many ids); the ids are not secrets, only unique.
import { randomFillSync } from "node:crypto";

const IDS_PER_FILL = 128;
const random = Buffer.alloc(16 * IDS_PER_FILL);
let next = random.length;
/** Written in place for each id, then read out as one latin1 string. */
const text = Buffer.from("00000000-0000-4000-8000-000000000000", "latin1");
const HEX = Buffer.from("0123456789abcdef", "latin1");
/** Where the hex digits of each of the 16 bytes go, around the dashes at 8, 13, 18 and 23. */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

export function randomUuid(): string {
  if (next === random.length) {
    randomFillSync(random);
    next = 0;
  }
  for (let i = 0; i < 16; i++) {
    let byte = random[next + i]!;
    if (i === 6)
      byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // RFC 9562 variant
    text[AT[i]!] = HEX[byte >> 4]!;
    text[AT[i]! + 1] = HEX[byte & 0x0f]!;
  }
  next += 16;
  return text.toString("latin1");
}
