// One asymmetric signing key of the broker, as stored and as published: ES256 (P-256), which every
// JOSE library verifies (jose, PyJWT, go-jose, Nimbus), its id the RFC 7638 thumbprint of the
// public key so that the id names the key wherever it is seen.
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from "jose";

export const SIGNING_ALGORITHM = "ES256";

export interface NewSigningKey {
  readonly kid: string;
  /** The private JWK, to be stored encrypted. */
  readonly privateJwk: JWK;
  /** The public JWK as published: kid, alg and use set. */
  readonly publicJwk: JWK;
}

export async function generateSigningKey(): Promise<NewSigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALGORITHM, { extractable: true });
  const bare = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(bare);
  return { kid, privateJwk: await exportJWK(privateKey), publicJwk: { ...bare, kid, alg: SIGNING_ALGORITHM, use: "sig" } };
}

/** The private key of a stored JWK, ready to sign. */
export async function signingKeyOf(privateJwk: JWK): Promise<CryptoKey> {
  const key = await importJWK(privateJwk, SIGNING_ALGORITHM);
  if (key instanceof Uint8Array) throw new Error("a signing key must be an asymmetric key, not a secret");
  return key;
}
