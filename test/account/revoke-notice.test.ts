// After Revoke on /account, the page says which application was disconnected: the name is carried
// in this browser's session, once, never in the redirect's query (a link could make it say anything).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, registerClient } from "../support/oauth-flow.ts";
import { AccountVisitor } from "./account-visitor.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

const noticeOf = (html: string) => /<p class="notice" id="notice" role="status">([^<]*)<\/p>/.exec(html)?.[1];

describe("the notice after a revoke", () => {
  it("names the application, once", async () => {
    const client = await registerClient(t.url, { client_name: "Docs Agent" });
    await obtainTokens(t.url, { user: "nina", client });
    const nina = new AccountVisitor(t.url);
    const { page } = await nina.signIn("nina");
    const [app] = page.apps;
    expect(app?.name).toBe("Docs Agent");
    const after = await nina.act("revoke", { grant: app!.grantId });
    expect(noticeOf(after.html)).toBe(`“Docs Agent” was disconnected: it can no longer use ${new URL(t.url).host}.`);
    // Reloaded (or opened from a link with ?notice=revoked): no name to show.
    const again = await nina.open("?notice=revoked");
    expect(noticeOf(again.html)).toBe(`The application was disconnected: it can no longer use ${new URL(t.url).host}.`);
  });
});
