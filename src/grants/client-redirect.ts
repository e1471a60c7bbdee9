// Builds the redirect back to a client. Only ever called with a redirect URI that was matched
// exactly against the client's registration; query parameters already in it are kept (RFC 6749 §3.1.2).
export function clientRedirectUrl(redirectUri: string, params: Record<string, string>): string {
  const url = new URL(redirectUri);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  return url.toString();
}
