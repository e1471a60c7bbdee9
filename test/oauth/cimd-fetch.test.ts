// The guarded fetch of Client ID Metadata Documents, against a real https server on 127.0.0.1 with
// a throwaway CA: https only, no redirects, size and type limits, and addresses refused after DNS
// resolution without any connection. DNS answers come from the test: nothing here leaves the machine.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { checkAddress } from "../../src/outbound/address-policy.ts";
import { createGuardedFetcher, type JsonFetcher, OutboundFetchError } from "../../src/outbound/guarded-fetch.ts";
import { DOCUMENT_HOST, startDocumentServer, type DocumentServer } from "../support/document-server.ts";

describe("address policy", () => {
  it.each([
    "127.0.0.1",
    "127.255.0.9",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "100.64.0.1",
    "169.254.1.1",
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:10.0.0.1",
    "64:ff9b::a00:1",
    "2002:7f00:1::1",
  ])("refuses %s unless private networks are allowed", (ip) => {
    expect(checkAddress(ip, false).allowed).toBe(false);
    expect(checkAddress(ip, true).allowed).toBe(true);
  });

  it.each(["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200"])(
    "refuses the cloud metadata address %s always",
    (ip) => {
      expect(checkAddress(ip, false)).toEqual({ allowed: false, reason: "a cloud metadata address" });
      expect(checkAddress(ip, true).allowed).toBe(false);
    },
  );

  it.each(["93.184.215.14", "1.1.1.1", "2606:4700::1111", "172.32.0.1", "100.128.0.1", "::ffff:8.8.8.8"])("allows the public address %s", (ip) => {
    expect(checkAddress(ip, false).allowed).toBe(true);
  });

  it("refuses what is not an address", () => {
    expect(checkAddress("example.com", true).allowed).toBe(false);
  });
});

describe("guarded fetch", () => {
  let server: DocumentServer;
  const fetchers: JsonFetcher[] = [];
  const fetcher = (allowPrivateNetworks: boolean, answers?: Record<string, string>, extra: { maxBytes?: number; timeoutMs?: number } = {}) => {
    const f = createGuardedFetcher({ allowPrivateNetworks, lookup: server.lookup(answers), ca: server.caCert, ...extra });
    fetchers.push(f);
    return f;
  };
  const failure = async (p: Promise<unknown>): Promise<OutboundFetchError> => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OutboundFetchError);
    return err as OutboundFetchError;
  };

  beforeAll(async () => {
    server = await startDocumentServer();
  });
  afterAll(async () => {
    await Promise.all(fetchers.map((f) => f.close()));
    await server.close();
  });

  it("fetches a JSON document over https with the caching headers", async () => {
    server.json("/ok.json", { hello: "world" }, { "cache-control": "max-age=90" });
    const res = await fetcher(true).getJson(`${server.origin}/ok.json`);
    expect(res).toMatchObject({ status: 200, body: { hello: "world" } });
    expect(res.headers["cache-control"]).toBe("max-age=90");
  });

  it("answers 404 and 410 with no body, for the caller to decide", async () => {
    server.route("/gone.json", (_req, res) => res.writeHead(410).end());
    await expect(fetcher(true).getJson(`${server.origin}/gone.json`)).resolves.toMatchObject({ status: 410, body: undefined });
    await expect(fetcher(true).getJson(`${server.origin}/missing.json`)).resolves.toMatchObject({ status: 404 });
  });

  it("does not follow redirects", async () => {
    server.json("/target.json", { hello: "world" });
    server.route("/moved.json", (_req, res) => res.writeHead(302, { location: `${server.origin}/target.json` }).end());
    const before = server.requests.length;
    const err = await failure(fetcher(true).getJson(`${server.origin}/moved.json`));
    expect(err.kind).toBe("redirect");
    expect(server.requests.slice(before)).toEqual(["GET /moved.json"]);
  });

  it("refuses a body above the cap, declared or streamed", async () => {
    const big = { pad: "x".repeat(40 * 1024) };
    server.json("/big.json", big);
    expect((await failure(fetcher(true).getJson(`${server.origin}/big.json`))).kind).toBe("too-large");
    server.route("/big-chunked.json", (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      for (let i = 0; i < 40; i++) res.write(" ".repeat(1024));
      res.end("{}");
    });
    expect((await failure(fetcher(true).getJson(`${server.origin}/big-chunked.json`))).kind).toBe("too-large");
    await expect(fetcher(true, undefined, { maxBytes: 64 * 1024 }).getJson(`${server.origin}/big.json`)).resolves.toMatchObject({ status: 200 });
  });

  it("refuses what is not JSON", async () => {
    server.route("/page.html", (_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<h1>hi</h1>"));
    expect((await failure(fetcher(true).getJson(`${server.origin}/page.html`))).kind).toBe("not-json");
    server.route("/broken.json", (_req, res) => res.writeHead(200, { "content-type": "application/json" }).end("{nope"));
    expect((await failure(fetcher(true).getJson(`${server.origin}/broken.json`))).kind).toBe("not-json");
  });

  it("refuses http", async () => {
    expect((await failure(fetcher(true).getJson(`http://${DOCUMENT_HOST}:${server.port}/ok.json`))).kind).toBe("not-https");
  });

  it("gives up after the deadline", async () => {
    server.route("/slow.json", () => undefined);
    const err = await failure(fetcher(true, undefined, { timeoutMs: 300 }).getJson(`${server.origin}/slow.json`));
    expect(err.kind).toBe("timeout");
  });

  it("refuses names that resolve to loopback, metadata or private addresses, without connecting", async () => {
    server.json("/ok.json", { hello: "world" });
    const before = server.connections;
    for (const address of ["127.0.0.1", "169.254.169.254", "10.0.0.5", "::1", "fd00:ec2::254", "100.64.1.1"]) {
      const err = await failure(fetcher(false, { [DOCUMENT_HOST]: address }).getJson(`${server.origin}/ok.json`));
      expect(err.kind).toBe("refused-address");
      expect(err.message).toContain(`resolves to ${address}`);
    }
    // Literal addresses in the URL are refused before anything is sent.
    for (const host of ["127.0.0.1", "[::1]", "169.254.169.254", "[::ffff:127.0.0.1]"]) {
      expect((await failure(fetcher(false).getJson(`https://${host}:${server.port}/ok.json`))).kind).toBe("refused-address");
    }
    expect(server.connections).toBe(before);
  });

  it("refuses a name when any one of its addresses is refused", async () => {
    const before = server.connections;
    const mixed = createGuardedFetcher({
      allowPrivateNetworks: false,
      ca: server.caCert,
      lookup: (_host, options, cb) => {
        const all = [
          { address: "93.184.215.14", family: 4 },
          { address: "127.0.0.1", family: 4 },
        ];
        if (options.all) (cb as unknown as (e: null, a: typeof all) => void)(null, all);
        else cb(null, all[1]!.address, 4);
      },
    });
    fetchers.push(mixed);
    expect((await failure(mixed.getJson(`${server.origin}/ok.json`))).kind).toBe("refused-address");
    expect(server.connections).toBe(before);
  });

  it("with private networks allowed, still never a cloud metadata address", async () => {
    const err = await failure(fetcher(true, { [DOCUMENT_HOST]: "169.254.169.254" }).getJson(`${server.origin}/ok.json`));
    expect(err.message).toContain("cloud metadata");
  });

  it("trusts only the CA it is given when one is given (an unknown CA fails the handshake)", async () => {
    const untrusting = createGuardedFetcher({ allowPrivateNetworks: true, lookup: server.lookup() });
    fetchers.push(untrusting);
    expect((await failure(untrusting.getJson(`${server.origin}/ok.json`))).kind).toBe("network");
  });
});
