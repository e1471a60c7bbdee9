// The headers every answer of the broker carries (the security headers, the CORS grant, the
// request id), kept aside on the response and written with its head, where the broker's values
// win over the route's and the MCP server's (Vary is merged instead).
//
// Why not res.setHeader() as the request starts: a response with headers set that way takes Node's
// slow path when its head is written with more headers (the proxy's relayed ones): each header
// becomes an array in a map, and each relayed one goes through setHeader too. Measured on
// ServerResponse alone: 4.6 KB per head with six headers set early and four relayed, 2.5 KB with
// the same ten handed to writeHead as one object (bench row (m) counts every request's bytes).
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from "node:http";
import vary from "vary";

/** Names and values, alternating; names in lower case (as Node keeps them, and as undici relays them). */
export type HeaderList = readonly string[];

const NONE: HeaderList = [];

/** `value` with `token` added, unless the Vary list names it already or is `*` (the vary package, as Koa's ctx.vary). */
function varyWith(value: OutgoingHttpHeader | undefined, token: string): string {
  if (value === undefined || value === "") return token;
  return vary.append(Array.isArray(value) ? value.join(", ") : String(value), token);
}

/** The broker server's response (http/server.ts makes every response one). */
export class BrokerResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  // Two places for lists (the security headers' and the CORS grant's): no array per request.
  #first: HeaderList = NONE;
  #second: HeaderList = NONE;
  #requestId: string | undefined;

  /** Adds `headers` to what every answer to this request carries. */
  carry(headers: HeaderList): void {
    if (this.#first === NONE) this.#first = headers;
    else if (this.#second === NONE) this.#second = headers;
    else this.#second = [...this.#second, ...headers];
  }

  carryRequestId(id: string): void {
    this.#requestId = id;
  }

  /** Forgets the carried headers once written (a head is written once). */
  #forget(): void {
    this.#first = NONE;
    this.#second = NONE;
    this.#requestId = undefined;
  }

  /**
   * Writes the head with `headers`, an object made for this answer and handed over: the carried
   * headers are added to it. When nothing was set on the response before, Node writes the object
   * as it is (its fast path).
   */
  writeHeadWith(statusCode: number, headers: OutgoingHttpHeaders): this {
    addTo(headers, this.#first);
    addTo(headers, this.#second);
    if (this.#requestId !== undefined) headers["x-request-id"] = this.#requestId;
    this.#forget();
    return super.writeHead(statusCode, headers);
  }

  // Every other head (Koa's answers, a stream's, an error's) is written through here: implicitly by
  // the first write or end, or explicitly. The headers given here are set on the response as Node
  // sets them when some were set before (its slow path), then the carried ones over them.
  override writeHead(
    statusCode: number,
    reasonOrHeaders?: string | OutgoingHttpHeaders | OutgoingHttpHeader[],
    headers?: OutgoingHttpHeaders | OutgoingHttpHeader[],
  ): this {
    // Node's own writeHead tells the two forms apart by the second argument's type, as here.
    const reason = typeof reasonOrHeaders === "string" ? reasonOrHeaders : undefined;
    const given = typeof reasonOrHeaders === "string" ? headers : reasonOrHeaders;
    if (!this.headersSent) {
      if (Array.isArray(given)) setList(this, given);
      else if (given) for (const name in given) this.setHeader(name, given[name] as OutgoingHttpHeader);
      setOn(this, this.#first);
      setOn(this, this.#second);
      if (this.#requestId !== undefined) this.setHeader("x-request-id", this.#requestId);
      this.#forget();
    }
    return reason === undefined ? super.writeHead(statusCode) : super.writeHead(statusCode, reason);
  }
}

/**
 * Headers given as a list (names and values alternating, or pairs), as Node's writeHead sets them
 * on a response with headers: each name given replaces what was set, repeated names all go out.
 */
function setList(res: ServerResponse, list: OutgoingHttpHeader[]): void {
  const flat = list.flatMap((entry) => entry) as string[];
  if (flat.length % 2 !== 0) throw new TypeError("writeHead: a header list needs a value for each name");
  for (let n = 0; n < flat.length; n += 2) res.removeHeader(flat[n]!);
  for (let n = 0; n < flat.length; n += 2) res.appendHeader(flat[n]!, flat[n + 1]!);
}

/** Adds `list` to a head's headers, over what they hold (Vary merged). */
function addTo(headers: OutgoingHttpHeaders, list: HeaderList): void {
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]!;
    headers[name] = name === "vary" ? varyWith(headers.vary, list[i + 1]!) : list[i + 1]!;
  }
}

/** Sets `list` on a response, over what was set (Vary merged). */
function setOn(res: ServerResponse, list: HeaderList): void {
  for (let i = 0; i < list.length; i += 2) {
    const name = list[i]!;
    res.setHeader(name, name === "vary" ? varyWith(res.getHeader("vary") as OutgoingHttpHeader | undefined, list[i + 1]!) : list[i + 1]!);
  }
}

/**
 * `headers` on every answer to this request. On a response of another server (the app mounted
 * elsewhere, a test's), set at once: correct, only slower.
 */
export function carryOnEveryAnswer(res: ServerResponse, headers: HeaderList): void {
  if (res instanceof BrokerResponse) res.carry(headers);
  else setOn(res, headers);
}

/** The request id on every answer to this request. */
export function carryRequestId(res: ServerResponse, id: string): void {
  if (res instanceof BrokerResponse) res.carryRequestId(id);
  else res.setHeader("X-Request-Id", id);
}

/** Writes the head of an answer whose headers are a fresh object the caller hands over. */
export function writeHeadWith(res: ServerResponse, statusCode: number, headers: OutgoingHttpHeaders): void {
  if (res instanceof BrokerResponse) res.writeHeadWith(statusCode, headers);
  else res.writeHead(statusCode, headers);
}
