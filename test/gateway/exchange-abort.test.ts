// ExchangeAbort (src/gateway/exchange-abort.ts): what cuts one request to the MCP server, as undici
// uses it (Dispatcher.request's `signal`: once("abort"), removeListener) and as the proxy does.
import { describe, expect, it, jest } from "@jest/globals";
import { Pool } from "undici";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ExchangeAbort, whenCut } from "../../src/gateway/exchange-abort.ts";
import { until } from "../support/wait.ts";

describe("ExchangeAbort", () => {
  it("calls an abort listener once, with its reason kept, however often it is cut", () => {
    const cut = new ExchangeAbort();
    const heard = jest.fn();
    cut.once("abort", heard);
    cut.abort(new Error("first"));
    cut.abort(new Error("second"));
    expect(heard).toHaveBeenCalledTimes(1);
    expect((cut.reason as Error).message).toBe("first");
  });

  it("keeps an abort listener as it was given (no once-wrapper), and removeListener finds it", () => {
    const cut = new ExchangeAbort();
    const listener = () => {};
    cut.once("abort", listener);
    expect(cut.rawListeners("abort")).toEqual([listener]);
    cut.removeListener("abort", listener);
    expect(cut.listenerCount("abort")).toBe(0);
    // Other events keep EventEmitter's once.
    const other = jest.fn();
    cut.once("other", other);
    cut.emit("other");
    cut.emit("other");
    expect(other).toHaveBeenCalledTimes(1);
  });

  it("whenCut's remover takes its listener off", () => {
    const cut = new ExchangeAbort();
    const heard = jest.fn();
    whenCut(cut, heard)();
    cut.abort(new Error("late"));
    expect(heard).not.toHaveBeenCalled();
  });

  it("is undici's signal: a request answered goes through, one whose answer has not come is cut", async () => {
    let waiting: http.ServerResponse | undefined;
    const server = http.createServer((req, res) => {
      if (req.url === "/quick") res.end("ok");
      else waiting = res;
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const quick = new ExchangeAbort();
      const answer = await pool.request({ method: "GET", path: "/quick", signal: quick });
      expect(await answer.body.text()).toBe("ok");

      const slow = new ExchangeAbort();
      const pending = pool.request({ method: "GET", path: "/slow", signal: slow });
      await until(() => waiting !== undefined, "the slow request at the server");
      slow.abort(new Error("client gone"));
      await expect(pending).rejects.toThrow();
    } finally {
      waiting?.destroy();
      await pool.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
