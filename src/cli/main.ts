// `npx mcp-auth-broker <command>`: the operator CLI on this process's arguments, environment and
// output. Same configuration (.env, environment) as the server.
import { runCli } from "./program.ts";
import { processIo } from "./io.ts";

// Exit at once: an HTTP keep-alive socket (check's IdP calls) must not hold the prompt. Writes to
// pipes and terminals are synchronous on Linux, so nothing printed is lost.
process.exit(await runCli(process.argv.slice(2), processIo));
