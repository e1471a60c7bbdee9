// `clients add --name X`, as a newcomer types it first: the answer names the option that is
// missing and the other kind of client, in the CLI's words rather than the registration's fields.
import { describe, expect, it } from "@jest/globals";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { runCliCaptured } from "../support/cli-in-process.ts";

describe("clients add without a redirect URI", () => {
  it("names --redirect-uri and --grant-type client_credentials, and exits 2 (usage)", async () => {
    const { code, stderr } = await runCliCaptured(["clients", "add", "--name", "X"], {
      cwd: mkdtempSync(path.join(tmpdir(), "mab-clients-")),
      env: { SECRET_KEY: randomBytes(32).toString("base64") },
    });
    expect(code).toBe(2);
    expect(stderr).toBe(
      "mcp-auth-broker: clients add needs --redirect-uri <uri>: where the client receives its authorization code (repeat for several); for a machine client without a user, use --grant-type client_credentials instead\n",
    );
  });
});
