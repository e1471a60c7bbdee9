// Request body readers with size and time limits. OAuth needs more than a generic body parser:
// duplicated parameters must be detected (RFC 6749 §3.1), and the content type is part of the contract.
//
// A body refused before it was read whole (too large, too slow, or too many in flight from one
// address) is answered with Connection: close and the request is left unread: the response reaches
// the client, then Node closes the socket. Destroying the request first would reset the connection
// before the client could read why.
import type Koa from "koa";
import { arrivedWholeSoon } from "./arrived-body.ts";
import { OAuthError } from "./errors.ts";
import { admitReceiving, retryAfterSeconds, slowClientLimits, TOO_MANY_BODIES } from "./slow-requests.ts";

export const DEFAULT_BODY_LIMIT = 64 * 1024;
/** A browser form of ours (consent, connected apps): a few fields. */
export const PAGE_FORM_LIMIT = 8 * 1024;
/** A client registration (RFC 7591): metadata, redirect URIs, perhaps a key set. */
export const REGISTRATION_LIMIT = 16 * 1024;

const CLOSE = { Connection: "close" } as const;

function tooLarge(limit: number): OAuthError {
  return new OAuthError("invalid_request", `Request body too large (limit ${limit} bytes).`, { status: 413, headers: CLOSE });
}

/**
 * The request stream failed while its body was read here: the client hung up mid-body, or sent
 * bytes Node's HTTP parser refused (in which case Node has already answered 400 itself). A client
 * error, never the broker's. Only the readers in this file make one: the error handler knows a
 * client's failing stream by this class, never by an error code — a database socket reset later in
 * the same request carries the same ECONNRESET, and is the broker's fault (503), not the client's.
 */
export class RequestBodyUnreadable extends OAuthError {
  /** What the stream reported: ECONNRESET, an HPE_* parser code, or "aborted". */
  readonly streamCode: string;
  constructor(cause: unknown) {
    super("invalid_request", "The request body could not be read (the connection failed or the body is malformed).", {
      status: 400,
      headers: CLOSE,
      cause,
    });
    this.name = "RequestBodyUnreadable";
    const code = (cause as { code?: unknown } | null | undefined)?.code;
    this.streamCode = typeof code === "string" ? code : "aborted";
  }
}

function unreadable(cause: unknown): RequestBodyUnreadable {
  return new RequestBodyUnreadable(cause);
}

/**
 * The body as text (refused over `limit` bytes). A body still arriving takes one of the client address's places
 * (http/slow-requests.ts) and must be whole within `bodyDeadlineMs`, else 408.
 */
export async function readRaw(ctx: Koa.Context, limit: number): Promise<string> {
  const declared = Number(ctx.get("content-length") || "0");
  if (declared > limit) throw tooLarge(limit);
  const req = ctx.req;
  // Already here whole (the usual token request): no place to take, nothing to wait for.
  const arrived = await arrivedWholeSoon(req, limit);
  if (arrived) return arrived.toString("utf8");
  let release: (() => void) | undefined;
  if (!req.complete) {
    release = admitReceiving(ctx);
    if (release === undefined) {
      throw new OAuthError("invalid_request", TOO_MANY_BODIES, { status: 429, headers: { "Retry-After": String(retryAfterSeconds(ctx.app)), ...CLOSE } });
    }
  }
  const { bodyDeadlineMs } = slowClientLimits(ctx.app);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let timer: NodeJS.Timeout | undefined;
    const settle = (err: OAuthError | null) => {
      req.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
      clearTimeout(timer);
      release?.();
      if (err === null) return resolve(Buffer.concat(chunks).toString("utf8"));
      // Stop reading; the error answer says Connection: close, and Node ends the socket after it.
      req.pause();
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return settle(tooLarge(limit));
      chunks.push(chunk);
    };
    const onEnd = () => settle(null);
    const onError = (err: Error) => settle(unreadable(err));
    const onClose = () => settle(unreadable(new Error("aborted")));
    // A client gone before the handler got here has had its "close" already.
    if (req.destroyed) return settle(unreadable(new Error("aborted")));
    req.on("data", onData).once("end", onEnd).once("error", onError).once("close", onClose);
    if (release !== undefined) {
      timer = setTimeout(
        () => settle(new OAuthError("invalid_request", `The request body did not arrive within ${bodyDeadlineMs / 1000} s.`, { status: 408, headers: CLOSE })),
        bodyDeadlineMs,
      );
    }
  });
}

/** Parameters of an application/x-www-form-urlencoded body; duplicates are an invalid_request. */
export async function readForm(ctx: Koa.Context, limit = DEFAULT_BODY_LIMIT): Promise<Record<string, string>> {
  if (!ctx.is("application/x-www-form-urlencoded")) {
    throw new OAuthError("invalid_request", "Content-Type must be application/x-www-form-urlencoded.");
  }
  return paramsToRecord(new URLSearchParams(await readRaw(ctx, limit)));
}

/** A JSON object body. */
export async function readJsonObject(
  ctx: Koa.Context,
  limit = DEFAULT_BODY_LIMIT,
  errorCode: "invalid_request" | "invalid_client_metadata" = "invalid_request",
): Promise<Record<string, unknown>> {
  if (!ctx.is("application/json")) throw new OAuthError(errorCode, "Content-Type must be application/json.");
  const text = await readRaw(ctx, limit);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new OAuthError(errorCode, "The request body is not valid JSON.");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new OAuthError(errorCode, "The request body must be a JSON object.");
  }
  return value as Record<string, unknown>;
}

/**
 * C0 controls and DEL. No OAuth parameter may hold them (RFC 6749 Appendix A: VSCHAR, NQCHAR,
 * URI-reference), and a NUL cannot even be stored in PostgreSQL text: refused at the edge.
 */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** Query or form parameters as a record; a parameter given twice, or with control characters, is refused. */
export function paramsToRecord(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of new Set(params.keys())) {
    const all = params.getAll(key);
    const name = JSON.stringify(key.slice(0, 40));
    if (all.length > 1) throw new OAuthError("invalid_request", `Parameter ${name} was given more than once.`);
    if (CONTROL_CHARACTERS.test(key) || CONTROL_CHARACTERS.test(all[0]!))
      throw new OAuthError("invalid_request", `Parameter ${name} contains control characters.`);
    out[key] = all[0]!;
  }
  return out;
}
