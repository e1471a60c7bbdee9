// When PUBLIC_URL has a path (https://host/broker), a reverse proxy in front may pass that path on
// (/broker/token) or strip it (/token). The broker serves its routes both ways, so either setup
// works without another setting.

/** PUBLIC_URL's path without a trailing slash: "" for https://host, "/broker" for https://host/broker/. */
export function publicPathPrefix(publicUrl: string): string {
  return new URL(publicUrl).pathname.replace(/\/+$/, "");
}

/** The request paths at which `path` (relative to PUBLIC_URL) is served. */
export function publicPaths(publicUrl: string, path: string): string[] {
  const prefix = publicPathPrefix(publicUrl);
  return prefix ? [path, `${prefix}${path}`] : [path];
}

const SLASH = 0x2f;

/** Whether a request path is one of `paths` or below one of them. Runs several times per request: it allocates nothing. */
export function isUnder(paths: readonly string[], path: string): boolean {
  for (const p of paths) if (path.startsWith(p) && (path.length === p.length || path.charCodeAt(p.length) === SLASH)) return true;
  return false;
}
