// How the access policy compares what an identity provider says (logins, e-mail addresses,
// domains, memberships) with what the operator wrote. Two rules, both about input the user controls
// through the IdP (an OIDC provider may let users choose their preferred_username):
//
// - Case is folded for ASCII letters only. Unicode case folding would make look-alikes equal:
//   "\u212A" (KELVIN SIGN) lower-cases to "k" and "\u017F" (LONG S) matches "s" under the regular
//   expression `iu` flags, so "\u212Aevin" would pass ALLOWED_USERS=kevin. Any other character
//   matches only itself.
// - Globs (`*` = any run of characters) are matched without backtracking, and values longer than
//   their kind allows never match: a backtracking regular expression took 61.7 s on the event loop
//   for `*a*a*a*a*a*a*@acme.com` against 100 characters.

/** Lower-cases A–Z and nothing else; the length and every other character stay as they are. */
export function foldAsciiCase(value: string): string {
  return value.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/** Equal when they differ at most in the case of ASCII letters. */
export function equalsAsciiCaseless(a: string, b: string): boolean {
  return a.length === b.length && foldAsciiCase(a) === foldAsciiCase(b);
}

/**
 * The longest value of each kind the policy compares; a longer one never matches. Bounds the work
 * per comparison and refuses what no real identity has:
 * - e-mail: 64 (local part) + 1 + 255 (domain), RFC 5321 §4.5.3.1;
 * - login: GitHub's are at most 39, Keycloak's usernames 255;
 * - subject: `<provider>:` + an OIDC `sub` (at most 255 ASCII characters, OIDC Core §2), or
 *   `client:` + a client id.
 */
export const MAX_COMPARED_LENGTH = { email: 320, login: 256, subject: 320 } as const;

export interface GlobOptions {
  /** Fold the case of ASCII letters (see foldAsciiCase). */
  readonly caseless: boolean;
  /** Values longer than this never match. */
  readonly maxLength: number;
}

/**
 * A matcher for `pattern`, where `*` matches any run of characters (including none) and every other
 * character only itself. The pattern splits at its stars into literal pieces: the first must start
 * the value, the last must end it, and each one between is found at its leftmost place after the
 * previous one. Leftmost is always right when `*` is the only wildcard (a later place leaves less
 * room for the rest), so nothing is ever tried twice: at most value length × pattern length steps.
 */
export function globMatcher(pattern: string, options: GlobOptions): (value: string) => boolean {
  const fold = options.caseless ? foldAsciiCase : (v: string) => v;
  const pieces = fold(pattern).split("*");
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  const middle = pieces.slice(1, -1).filter((piece) => piece !== "");
  return (raw) => {
    if (raw.length > options.maxLength) return false;
    const value = fold(raw);
    if (pieces.length === 1) return value === first;
    if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) return false;
    const end = value.length - last.length;
    let at = first.length;
    for (const piece of middle) {
      const found = value.indexOf(piece, at);
      if (found < 0 || found + piece.length > end) return false;
      at = found + piece.length;
    }
    return true;
  };
}
