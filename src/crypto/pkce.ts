// PKCE S256 (RFC 7636 §4.2), shared by both legs that use it: the broker as an authorization server
// checking its clients (grants/pkce.ts) and the broker as a client of the upstream IdP (upstream/).
// At the bottom of the layers, so that neither has to import the other.
import { createHash } from "node:crypto";

/** The S256 code challenge of a verifier: unpadded base64url SHA-256 (always 43 characters). */
export function s256Challenge(verifier: string): string {
  return createHash("sha256").update(verifier, "ascii").digest("base64url");
}
