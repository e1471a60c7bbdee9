// The process guard: an error that escapes every handler is logged and the process serves on.
import { describe, expect, it } from "@jest/globals";
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import { installProcessGuard } from "../../src/process-guard.ts";
import { createLogger } from "../../src/logger.ts";

describe("process guard", () => {
  it("logs uncaught exceptions and unhandled rejections at error, with their message, and counts them", () => {
    let output = "";
    const logger = createLogger(
      "info",
      new Writable({
        write: (chunk: Buffer, _enc, done) => {
          output += chunk.toString();
          done();
        },
      }),
    );
    const events = new EventEmitter();
    const guard = installProcessGuard(logger, events as unknown as NodeJS.Process);
    events.emit("uncaughtException", Object.assign(new Error("aborted"), { code: "UND_ERR_ABORTED" }), "uncaughtException");
    events.emit("unhandledRejection", new Error("late rejection"), Promise.resolve());
    expect(guard.caught()).toBe(2);
    const lines = output
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { level: number; msg: string; err: { message: string }; origin: string });
    expect(lines.map((l) => [l.level, l.origin, l.err.message])).toEqual([
      [50, "uncaughtException", "aborted"],
      [50, "unhandledRejection", "late rejection"],
    ]);
    guard.uninstall();
    expect(events.listenerCount("uncaughtException")).toBe(0);
  });
});
