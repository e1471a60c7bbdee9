// Which clients may come and from where: dynamic registration and its unused leftovers, the
// client interop switches (app-scheme redirects, CIMD, scopes) and the browser origins.
import { bool, intIn, parseVar } from "./parse-var.ts";
import { parseAllowedOrigins, parseClientInterop } from "./client-interop.ts";
import type { Env } from "./values.ts";

export function parseRegistration(env: Env, demoMode: boolean) {
  const dynamicRegistration = parseVar(env, "DYNAMIC_REGISTRATION", bool(true), "true or false");
  const unusedRegistrations = {
    max: parseVar(env, "DYNAMIC_REGISTRATION_MAX_UNUSED", intIn(1, 10_000_000, 10_000), "a whole number between 1 and 10000000"),
    // At least a sign-in's time (an authorization waits 10 minutes for its user); an hour by default,
    // far less than a day of a registration flood.
    lifetimeSeconds: parseVar(env, "DYNAMIC_REGISTRATION_UNUSED_SECONDS", intIn(600, 30 * 86400, 3600), "a whole number of seconds between 600 and 2592000"),
  };
  const clients = parseClientInterop(env, {
    allowAppSchemeRedirects: parseVar(env, "ALLOW_APP_SCHEME_REDIRECTS", bool(true), "true or false"),
    cimd: parseVar(env, "CIMD", bool(true), "true or false"),
    cimdAllowPrivateNetworks: parseVar(env, "CIMD_ALLOW_PRIVATE_NETWORKS", bool(false), "true or false"),
  });
  const allowedOrigins = parseAllowedOrigins(env, demoMode);
  return { dynamicRegistration, unusedRegistrations, clients, allowedOrigins };
}
