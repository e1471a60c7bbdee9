// Security events reach the log at warn, as they happen — a replayed authorization
// code, a reused refresh token, a refused consent form (CSRF), a burst of wrong client secrets —
// and the log never holds the code, token or guessed secret itself.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Writable } from "node:stream";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { registerOperatorClient } from "../support/oauth-client.ts";

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

let t: TestBroker;
let output = "";
const warnings = () =>
  output
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LogLine)
    .filter((l) => l.level === 40);

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      output += chunk.toString();
      done();
    },
  });
  // Grace 0: a rotated refresh token presented again is reuse at once.
  t = await startBroker({ LOG_LEVEL: "warn", REFRESH_GRACE_SECONDS: "0" }, { logDestination: sink });
});
afterAll(async () => t.stop());

describe("security events in the log", () => {
  it("a replayed authorization code: one warning naming the client and grant, not the code", async () => {
    const client = await registerClient(t.url);
    const { callback, verifier } = await authorize(t.url, client, { user: "rita" });
    const code = callback.searchParams.get("code")!;
    const exchange = () =>
      tokenRequest(t.url, { grant_type: "authorization_code", code, redirect_uri: client.redirect_uri, code_verifier: verifier, client_id: client.client_id });
    expect((await exchange()).status).toBe(200);
    expect((await exchange()).body.error).toBe("invalid_grant");
    const replay = warnings().filter((l) => /authorization code was presented twice/.test(l.msg));
    expect(replay).toEqual([expect.objectContaining({ clientId: client.client_id, grantId: expect.any(String) })]);
    expect(output).not.toContain(code);
  });

  it("a reused refresh token: one warning, not the token", async () => {
    const { client, tokens } = await obtainTokens(t.url, { user: "sam" });
    const refresh = () => tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    const first = await refresh();
    expect(first.status).toBe(200);
    expect((await refresh()).body.error).toBe("invalid_grant");
    expect(warnings().filter((l) => /rotated refresh token was presented again/.test(l.msg))).toEqual([
      expect.objectContaining({ clientId: client.client_id, grantId: expect.any(String) }),
    ]);
    for (const secret of [tokens.refresh_token, tokens.access_token, first.body.refresh_token as string]) expect(output).not.toContain(secret);
  });

  it("a consent answer with a forged CSRF token", async () => {
    const before = warnings().length;
    const res = await fetch(`${t.url}/consent`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ transaction: "tx-from-an-attacker-page", csrf: "forged-csrf-value", decision: "allow" }).toString(),
      redirect: "manual",
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(warnings().slice(before)).toEqual([expect.objectContaining({ msg: expect.stringContaining("a consent answer was refused") })]);
    expect(output).not.toContain("forged-csrf-value");
  });

  it("a burst of wrong client secrets: one warning per burst, never the guesses", async () => {
    const machine = await registerOperatorClient(t.broker.database.db);
    const guess = (n: number) => tokenRequest(t.url, { grant_type: "client_credentials" }, { id: machine.client_id, secret: `guess-number-${n}` });
    for (let n = 1; n <= 7; n++) expect((await guess(n)).status).toBe(401);
    const bursts = warnings().filter((l) => /repeated failed client authentication/.test(l.msg));
    expect(bursts).toEqual([expect.objectContaining({ clientId: machine.client_id, failures: 5, windowSeconds: 60 })]);
    expect(output).not.toContain("guess-number-");
    expect(output).not.toContain(machine.client_secret!);
  });
});
