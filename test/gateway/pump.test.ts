// pump (src/gateway/pump.ts): the relay of an MCP server's answer to the client, with
// backpressure, and a callback that says how it ended.
import { describe, expect, it } from "@jest/globals";
import { PassThrough, Readable, Writable } from "node:stream";
import { pump } from "../../src/gateway/pump.ts";
import { until } from "../support/wait.ts";

/** A writable that keeps what it got; `highWaterMark` 1 makes every write ask for a drain (pump pauses the source until it comes). */
function sink(): Writable & { got: string[] } {
  const got: string[] = [];
  const w = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, callback) {
      got.push(chunk.toString());
      // Completed after write() has returned, as a socket's are: write() then says to wait for "drain".
      queueMicrotask(() => callback());
    },
  });
  return Object.assign(w, { got });
}

const ended = (source: Readable, destination: Writable) => new Promise<Error | undefined>((resolve) => pump(source, destination, resolve));

describe("pump", () => {
  it("relays every chunk in order through backpressure, then calls back without an error", async () => {
    const destination = sink();
    const source = Readable.from(["a", "b", "c", "d"], { objectMode: false });
    let pauses = 0;
    source.on("pause", () => pauses++);
    const err = await ended(source, destination);
    expect(err).toBeUndefined();
    expect(destination.got.join("")).toBe("abcd");
    // Each write asked for a drain: the source was paused and resumed on it.
    expect(pauses).toBeGreaterThanOrEqual(3);
    expect(destination.writableFinished).toBe(true);
  });

  it.each([
    {
      what: "the source fails (the MCP server's connection reset)",
      fail: (source: PassThrough) => source.destroy(new Error("upstream reset")),
      message: "upstream reset",
    },
    {
      what: "the destination closes before the end (the client went away)",
      fail: (_source: PassThrough, destination: Writable) => destination.destroy(),
      message: "the destination closed before the end of the stream",
    },
  ])("calls back with an error and destroys both sides when $what", async ({ fail, message }) => {
    const source = new PassThrough();
    const destination = sink();
    const done = ended(source, destination);
    source.write("first");
    fail(source, destination);
    expect((await done)?.message).toBe(message);
    expect(source.destroyed && destination.destroyed).toBe(true);
  });

  it("takes nothing more for a destination someone else ended", async () => {
    const source = new PassThrough();
    const destination = sink();
    const done = ended(source, destination);
    source.write("first");
    await until(() => destination.got.length === 1, "the first chunk written");
    destination.end("last");
    source.write("after");
    source.end();
    expect(await done).toBeUndefined();
    expect(destination.got).toEqual(["first", "last"]);
  });

  it("calls back once, and leaves no listener of its own on either side", async () => {
    const source = new PassThrough();
    const destination = sink();
    let calls = 0;
    const done = new Promise<void>((resolve) =>
      pump(source, destination, () => {
        calls++;
        resolve();
      }),
    );
    source.end("all");
    await done;
    destination.emit("close");
    expect(calls).toBe(1);
    expect(source.listenerCount("data") + source.listenerCount("end")).toBe(0);
    expect(destination.listenerCount("drain")).toBe(0);
  });
});
