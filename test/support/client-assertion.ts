// Client assertions (private_key_jwt, RFC 7523 §2.2) as real clients sign them, and the classic
// forgeries an authorization server must refuse: no signature at all (alg none), and an HMAC whose
// "secret" is the client's public key (HS256 keyed with the published PEM).
import { randomUUID } from "node:crypto";
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from "jose";

export const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

export interface SigningKey {
  readonly kid: string | undefined;
  readonly alg: string;
  readonly privateKey: CryptoKey;
  /** The public key as a JWK (with kid, alg and use when set): what a key set publishes. */
  readonly jwk: JWK;
  /** The public key as PEM (SPKI): what an HMAC forgery uses as its secret. */
  readonly pem: string;
}

/** A fresh key pair; RS256 with a kid unless told otherwise. */
export async function signingKey(kid: string | undefined = `k-${randomUUID()}`, alg = "RS256"): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk: JWK = { ...(await exportJWK(publicKey)), ...(kid ? { kid } : {}), alg, use: "sig" };
  return { kid, alg, privateKey, jwk, pem: await exportSPKI(publicKey) };
}

/** A JWK Set of the keys' public halves. */
export function keySet(...keys: SigningKey[]): { keys: JWK[] } {
  return { keys: keys.map((k) => k.jwk) };
}

/**
 * The claims a client assertion carries: iss = sub = the client, aud, iat, exp five minutes on (as
 * the MCP SDK signs them), a fresh jti. `nowMs`: the time it is signed at (a test's manual clock).
 */
export function assertionClaims(clientId: string, aud: string | string[], overrides: JWTPayload = {}, nowMs = Date.now()): JWTPayload {
  const now = Math.floor(nowMs / 1000);
  return { iss: clientId, sub: clientId, aud, iat: now, exp: now + 300, jti: randomUUID(), ...overrides };
}

/** Signs `claims` with `key` (header alg and kid as the key says, typ JWT). */
export function sign(key: SigningKey, claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, typ: "JWT", ...(key.kid ? { kid: key.kid } : {}), ...header }).sign(key.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** The same claims, not signed at all. */
export function unsigned(claims: JWTPayload, kid?: string): string {
  return `${b64({ alg: "none", typ: "JWT", ...(kid ? { kid } : {}) })}.${b64(claims)}.`;
}

/** The same claims "signed" with HS256 keyed by the client's public key (its PEM): the key-confusion forgery. */
export function hmacWithPublicKey(key: SigningKey, claims: JWTPayload): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT", ...(key.kid ? { kid: key.kid } : {}) }).sign(new TextEncoder().encode(key.pem));
}

/** The form fields that carry an assertion. */
export function assertionForm(assertion: string): { client_assertion_type: string; client_assertion: string } {
  return { client_assertion_type: JWT_BEARER, client_assertion: assertion };
}
