// PKCE (RFC 7636), S256 only: OAuth 2.1 and the MCP authorization spec require it of every client.
import { constantTimeEqual } from "../crypto/tokens.ts";
import { s256Challenge } from "../crypto/pkce.ts";

export { s256Challenge };

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export function isValidCodeVerifier(verifier: string): boolean {
  return VERIFIER.test(verifier);
}

/** An S256 challenge is the unpadded base64url SHA-256 of the verifier: always 43 characters. */
export function isValidS256Challenge(challenge: string): boolean {
  return CHALLENGE.test(challenge);
}

export function verifyPkceS256(verifier: string, challenge: string): boolean {
  return isValidCodeVerifier(verifier) && constantTimeEqual(s256Challenge(verifier), challenge);
}
