// Everything a Transform emits for `chunks` written one by one, then ended: for tests and benches
// of stream rewriters (the tools/list filter).
import type { Transform } from "node:stream";

export async function through(transform: Transform, chunks: readonly Buffer[]): Promise<Buffer> {
  const out: Buffer[] = [];
  transform.on("data", (chunk: Buffer) => out.push(chunk));
  const ended = new Promise((resolve) => transform.once("end", resolve));
  for (const chunk of chunks) transform.write(chunk);
  transform.end();
  await ended;
  return Buffer.concat(out);
}
