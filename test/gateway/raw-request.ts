// One HTTP/1.1 request written byte for byte on a socket: Node's http client and fetch normalise
// some request targets (dot segments) and refuse to send others (a forged Host with fetch).
import { connect } from "node:net";

export interface RawResponse {
  readonly status: number;
  readonly body: string;
}

/** Sends `method target` with `headers` (a Host header of 127.0.0.1:port unless one is given). */
export function rawRequest(port: number, method: string, target: string, headers: Record<string, string>, body = ""): Promise<RawResponse> {
  const hasHost = Object.keys(headers).some((name) => name.toLowerCase() === "host");
  const head = [
    `${method} ${target} HTTP/1.1`,
    ...(hasHost ? [] : [`Host: 127.0.0.1:${port}`]),
    "Connection: close",
    `Content-Length: ${Buffer.byteLength(body)}`,
  ];
  for (const [name, value] of Object.entries(headers)) head.push(`${name}: ${value}`);
  return new Promise((resolve, reject) => {
    // write, not end: a half-closed request socket reads as a client that went away.
    const socket = connect(port, "127.0.0.1", () => socket.write(Buffer.from(`${head.join("\r\n")}\r\n\r\n${body}`, "latin1")));
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
  });
}
