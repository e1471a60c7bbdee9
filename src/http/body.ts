// Request body readers with size limits. OAuth needs more than a generic body parser: duplicated
// parameters must be detected (RFC 6749 §3.1), and the content type is part of the contract.
import type Koa from "koa";
import { OAuthError } from "./errors.ts";

export const DEFAULT_BODY_LIMIT = 64 * 1024;

async function readRaw(ctx: Koa.Context, limit: number): Promise<string> {
  const declared = Number(ctx.get("content-length") || "0");
  if (declared > limit) throw new OAuthError("invalid_request", `Request body too large (limit ${limit} bytes).`, { status: 413 });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      ctx.req.destroy();
      throw new OAuthError("invalid_request", `Request body too large (limit ${limit} bytes).`, { status: 413 });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Parameters of an application/x-www-form-urlencoded body; duplicates are an invalid_request. */
export async function readForm(ctx: Koa.Context, limit = DEFAULT_BODY_LIMIT): Promise<Record<string, string>> {
  if (!ctx.is("application/x-www-form-urlencoded")) {
    throw new OAuthError("invalid_request", "Content-Type must be application/x-www-form-urlencoded.");
  }
  return paramsToRecord(new URLSearchParams(await readRaw(ctx, limit)));
}

/** A JSON object body. */
export async function readJsonObject(ctx: Koa.Context, limit = DEFAULT_BODY_LIMIT, errorCode: "invalid_request" | "invalid_client_metadata" = "invalid_request"): Promise<Record<string, unknown>> {
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
    if (CONTROL_CHARACTERS.test(key) || CONTROL_CHARACTERS.test(all[0]!)) throw new OAuthError("invalid_request", `Parameter ${name} contains control characters.`);
    out[key] = all[0]!;
  }
  return out;
}
