// The broker's signing keys, rotated on a fixed schedule with overlap. Time is cut into rotation
// periods; period g is signed with key g. Key g+1 is made and published `lead` before its period
// starts (verifiers that cache the key set have it before the first assertion it signs), and key g
// stays published `overlap` after its period ends (the assertions it signed stay verifiable until
// they expire). Every instance derives the same periods from the clock, and `generation` is unique
// in the store: instances that reach a period together make one key, not two.
import type { CryptoKey, JWK } from "jose";
import type { Db } from "../store/db.ts";
import { DecryptionError, type SecretBox } from "../store/secrets.ts";
import { generateSigningKey, signingKeyOf, SIGNING_ALGORITHM } from "../crypto/signing-key.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import type { Clock } from "../lib/clock.ts";

const HOUR_MS = 3_600_000;

export interface SigningKeySchedule {
  /** How long one key signs. */
  readonly rotationMs: number;
  /** How long before its period a key is published. */
  readonly leadMs: number;
  /** How long after its period a key stays published: more than an assertion lives, plus a verifier's cache. */
  readonly overlapMs: number;
}

export const DEFAULT_SIGNING_KEY_SCHEDULE: SigningKeySchedule = { rotationMs: 30 * 24 * HOUR_MS, leadMs: HOUR_MS, overlapMs: HOUR_MS };

export interface SigningKey {
  readonly kid: string;
  readonly generation: number;
  readonly algorithm: string;
  readonly publicJwk: JWK;
  readonly privateKey: CryptoKey;
}

type KeyStore = Pick<Db, "signingKey">;

/** Which generations matter at `now`: the one that signs, and those published besides it. */
function generationsAt(now: number, s: SigningKeySchedule): { signing: number; next?: number; previous?: number; validUntil: number } {
  const signing = Math.floor(now / s.rotationMs);
  const start = signing * s.rotationMs;
  const end = start + s.rotationMs;
  const nextFrom = end - s.leadMs;
  const previousUntil = start + s.overlapMs;
  return {
    signing,
    ...(now >= nextFrom ? { next: signing + 1 } : {}),
    ...(now < previousUntil ? { previous: signing - 1 } : {}),
    // The moment any of the above changes.
    validUntil: Math.min(...[end, nextFrom, previousUntil].filter((t) => t > now)),
  };
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "P2002";
}

export class SigningKeys {
  private keys = new Map<number, SigningKey>();
  private validUntil = Number.NEGATIVE_INFINITY;
  private readonly flight = new SingleFlight<void>();

  constructor(
    private readonly db: KeyStore,
    private readonly box: SecretBox,
    private readonly clock: Clock,
    private readonly schedule: SigningKeySchedule = DEFAULT_SIGNING_KEY_SCHEDULE,
  ) {}

  /** The key that signs now. */
  async signing(): Promise<SigningKey> {
    const now = this.clock.now();
    if (now >= this.validUntil) await this.flight.run("keys", () => this.settle(now));
    const key = this.keys.get(generationsAt(now, this.schedule).signing);
    if (!key) throw new Error("no signing key for the current period");
    return key;
  }

  /** The public keys verifiers may meet now: the signing key and those published around it. */
  async published(): Promise<JWK[]> {
    const now = this.clock.now();
    if (now >= this.validUntil) await this.flight.run("keys", () => this.settle(now));
    const { signing, next, previous } = generationsAt(now, this.schedule);
    return [signing, next, previous].flatMap((g) => {
      const key = g === undefined ? undefined : this.keys.get(g);
      return key ? [key.publicJwk] : [];
    });
  }

  /** Loads (and makes where missing) the keys `now` needs; forgets and deletes the others. */
  private async settle(now: number): Promise<void> {
    const at = generationsAt(now, this.schedule);
    const wanted = [at.previous, at.signing, at.next].filter((g): g is number => g !== undefined);
    const lowest = Math.min(...wanted);
    await this.db.signingKey.deleteMany({ where: { generation: { lt: lowest } } });
    const loaded = new Map<number, SigningKey>();
    for (const row of await this.db.signingKey.findMany({ where: { generation: { in: wanted } } })) {
      const key = await this.readable(row);
      if (key) loaded.set(row.generation, key);
    }
    for (const g of [at.signing, at.next]) {
      if (g !== undefined && !loaded.has(g)) loaded.set(g, await this.make(g, now));
    }
    this.keys = loaded;
    this.validUntil = at.validUntil;
  }

  /**
   * The stored key, or undefined when SECRET_KEY changed without keeping the old one: that key can
   * sign nothing any more, so it is deleted (and, for a period still needed, made anew).
   */
  private async readable(row: { id: string; generation: number; algorithm: string; privateJwk: string; publicJwk: string }): Promise<SigningKey | undefined> {
    try {
      const privateJwk = JSON.parse(await this.box.decrypt(row.privateJwk)) as JWK;
      return {
        kid: row.id,
        generation: row.generation,
        algorithm: row.algorithm,
        publicJwk: JSON.parse(row.publicJwk) as JWK,
        privateKey: await signingKeyOf(privateJwk),
      };
    } catch (err) {
      if (!(err instanceof DecryptionError)) throw err;
      await this.db.signingKey.deleteMany({ where: { id: row.id } });
      return undefined;
    }
  }

  /** Makes key `generation`; when another instance made it first, that one is read instead. */
  private async make(generation: number, now: number): Promise<SigningKey> {
    const made = await generateSigningKey();
    try {
      await this.db.signingKey.create({
        data: {
          id: made.kid,
          generation,
          algorithm: SIGNING_ALGORITHM,
          privateJwk: await this.box.encrypt(JSON.stringify(made.privateJwk)),
          publicJwk: JSON.stringify(made.publicJwk),
          createdAt: new Date(now),
        },
      });
      return { kid: made.kid, generation, algorithm: SIGNING_ALGORITHM, publicJwk: made.publicJwk, privateKey: await signingKeyOf(made.privateJwk) };
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      const row = await this.db.signingKey.findUniqueOrThrow({ where: { generation } });
      const key = await this.readable(row);
      if (!key) throw new Error("another instance made this period's signing key under another SECRET_KEY: every instance needs the same SECRET_KEY");
      return key;
    }
  }
}
