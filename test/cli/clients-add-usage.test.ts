// `clients add --name X`, as a newcomer types it first: the answer names the option that is
// missing and the other kind of client, in the CLI's words rather than the registration's fields.
import { describe, expect, it } from "@jest/globals";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { runCli } from "../../src/cli/program.ts";
import { cleanEnv } from "../support/spawn.ts";

describe("clients add without a redirect URI", () => {
  it("names --redirect-uri and --grant-type client_credentials, and exits 2 (usage)", async () => {
    let stderr = "";
    const code = await runCli(["clients", "add", "--name", "X"], {
      cwd: mkdtempSync(path.join(tmpdir(), "mab-clients-")),
      env: cleanEnv({ SECRET_KEY: randomBytes(32).toString("base64") }),
      out: () => undefined,
      err: (text) => {
        stderr += text;
      },
    });
    expect(code).toBe(2);
    expect(stderr).toBe(
      "mcp-auth-broker: clients add needs --redirect-uri <uri>: where the client receives its authorization code (repeat for several); for a machine client without a user, use --grant-type client_credentials instead\n",
    );
  });
});
