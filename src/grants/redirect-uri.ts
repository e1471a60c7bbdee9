// Redirect URIs (spec §5.5.2, OAuth 2.1 §2.3.1): https, or http on a loopback host; absolute,
// no fragment. Authorization requests must then match a registered one exactly.
import { isLoopbackHost } from "../config.ts";

export function redirectUriProblem(value: string): string | null {
  if (value.includes("#")) return "must not contain a fragment";
  // URL parsing strips surrounding whitespace and control characters, but the stored string is
  // what authorization requests must match exactly: refuse them rather than store a look-alike.
  if (/[\s\x00-\x1f\x7f]/.test(value)) return "must not contain whitespace or control characters";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute URI";
  }
  if (url.protocol === "https:") return null;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return null;
  return "must use https, or http on a loopback host (localhost, 127.0.0.1, [::1])";
}
