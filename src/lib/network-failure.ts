// Why a connection to another service failed, in words an operator can act on: DNS, refused,
// timeout, unreachable, TLS. Used wherever the broker reports a service it cannot reach (the
// identity provider, PostgreSQL, the MCP server), at start, in `check` and in the logs.

interface ErrorShape {
  name?: string;
  /** A string for Node's system errors; a number on DOMException (TimeoutError's is 23). */
  code?: string | number;
  message?: string;
  hostname?: string;
  address?: string;
  port?: number;
  cause?: unknown;
}

export interface NetworkFailure {
  /** What happened: "connection refused by 127.0.0.1:5432". */
  readonly cause: string;
  /** What to do about it, naming the setting to check. */
  readonly fix: string;
}

const TLS_CODE = /^(CERT_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|ERR_TLS_|ERR_SSL_|EPROTO$|HOSTNAME_MISMATCH)/;

/** The innermost error of a cause chain that says something about the connection. */
function connectionError(err: unknown): ErrorShape | undefined {
  let found: ErrorShape | undefined;
  let e = err as ErrorShape | undefined;
  for (let depth = 0; e && typeof e === "object" && depth < 6; depth++) {
    if (typeof e.code === "string" || e.name === "TimeoutError" || e.name === "AbortError") found = e;
    // AggregateError (happy eyeballs: one error per address tried): the first one speaks for all.
    const errors = (e as { errors?: unknown[] }).errors;
    e = (e.cause ?? (Array.isArray(errors) ? errors[0] : undefined)) as ErrorShape | undefined;
  }
  return found;
}

/**
 * `service` names what was called ("the identity provider"), `setting` where its address is
 * configured ("UPSTREAM_ISSUER"). Undefined when the error is not about the connection.
 */
export function explainNetworkFailure(err: unknown, service: string, setting: string): NetworkFailure | undefined {
  const e = connectionError(err);
  if (!e) return undefined;
  const where = e.address ? `${e.address}${e.port ? `:${e.port}` : ""}` : e.hostname;
  const code = typeof e.code === "string" ? e.code : "";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN")
    return {
      cause: `DNS: the host name ${e.hostname ? `${e.hostname} ` : ""}does not resolve (${code})`,
      fix: `check the host name in ${setting} and this machine's DNS`,
    };
  if (code === "ECONNREFUSED")
    return {
      cause: `connection refused${where ? ` by ${where}` : ""} (nothing listens there)`,
      fix: `start ${service}, or correct the host and port in ${setting}`,
    };
  if (code === "ETIMEDOUT" || (code.startsWith("UND_ERR_") && code.endsWith("TIMEOUT")) || e.name === "TimeoutError" || e.name === "AbortError")
    return {
      cause: `timeout: ${service} did not answer in time${where ? ` (${where})` : ""}`,
      fix: `check that ${setting} is right and that a firewall or proxy lets this machine reach it`,
    };
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH")
    return {
      cause: `network: ${where ?? "the host"} is unreachable from this machine (${code})`,
      fix: `check the routing and firewall between this machine and ${setting}'s host`,
    };
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE")
    return {
      cause: `the connection was closed by the other side (${code})`,
      fix: `check that ${setting} names the right port and scheme (http vs https) of ${service}`,
    };
  if (code === "ERR_SSL_WRONG_VERSION_NUMBER" || code === "ERR_SSL_PACKET_LENGTH_TOO_LONG")
    return {
      cause: `TLS: ${where ?? "the server"} does not answer in TLS there (${code})`,
      fix: `if ${service} speaks plain HTTP on that port, write http:// in ${setting}; else correct the port`,
    };
  if (TLS_CODE.test(code))
    return {
      // OpenSSL's messages run over several lines of library detail: the first says what failed.
      cause: `TLS: ${(e.message ?? code).split("\n")[0]!.replace(/^[0-9A-F]+:error:[0-9A-F]+:SSL routines:/, "")} (${code})`,
      fix: `give ${service} a certificate this machine trusts for that host name, or point NODE_EXTRA_CA_CERTS at your CA's PEM file`,
    };
  return undefined;
}

/** "cause: fix", or undefined: one clause for a longer message. */
export function describeNetworkFailure(err: unknown, service: string, setting: string): string | undefined {
  const failure = explainNetworkFailure(err, service, setting);
  return failure && `${failure.cause}; ${failure.fix}`;
}
