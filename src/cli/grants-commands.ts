// `grants list|revoke`: what users and clients hold access, and taking it away (with the same
// cascade as HTTP revocation: every broker token, then the upstream token when no grant needs it).
import { serverNamed, serverOption } from "./server-option.ts";
import type { Command } from "commander";
import { withContext } from "./context.ts";
import { CliError, jsonCommand, iso, printJson, printTable } from "./output.ts";
import type { CliIo } from "./io.ts";

function listCommand(grants: Command, io: CliIo): void {
  serverOption(jsonCommand(grants, "list", "list grants, live ones by default"))
    .option("--user <subject>", "only grants of this upstream user, e.g. github:583231")
    .option("--client <id>", "only grants of this client")
    .option("--all", "include revoked and expired grants")
    .action(async (opts: { user?: string; client?: string; all?: boolean; json?: boolean; server?: string }) => {
      await withContext(io, async ({ services, config }) => {
        const server = serverNamed(config, opts.server);
        const list = await services.grantListing.listGrants({ user: opts.user, client: opts.client, all: opts.all, resource: server?.resource });
        if (opts.json)
          return printJson(
            io,
            list.map((g) => ({
              ...g,
              createdAt: g.createdAt.toISOString(),
              lastUsedAt: g.lastUsedAt.toISOString(),
              idleExpiresAt: g.idleExpiresAt.toISOString(),
              absoluteExpiresAt: g.absoluteExpiresAt.toISOString(),
              revokedAt: g.revokedAt?.toISOString() ?? null,
              ended: g.ended ? { reason: g.ended.reason, at: g.ended.at.toISOString() } : null,
            })),
          );
        printTable(
          io,
          list.map((g) => ({
            id: g.id,
            user: g.subject ?? "(client credentials)",
            client: g.clientName ?? g.clientId,
            status: g.status,
            lastUsed: iso(g.lastUsedAt),
            // Why a grant ended: only --all lists ended ones.
            ...(opts.all ? { ended: g.ended ? `${g.ended.reason} at ${iso(g.ended.at)}` : "-" } : {}),
          })),
          opts.all ? "No grants." : "No live grants.",
        );
      });
    });
}

function revokeCommand(grants: Command, io: CliIo): void {
  jsonCommand(grants, "revoke", "revoke one grant by id, or every grant of a user with --user")
    .argument("[id]", "grant id (from `grants list`)")
    .option("--user <subject>", "revoke every live grant of this upstream user, e.g. github:583231")
    .action(async (id: string | undefined, opts: { user?: string; json?: boolean }) => {
      if (!id && !opts.user) throw new CliError("give a grant id or --user <subject>", 2);
      if (id && opts.user) throw new CliError("give either a grant id or --user, not both", 2);
      await withContext(io, async ({ services }) => {
        let revoked: string[];
        if (id) {
          const grant = await services.grantListing.findGrant(id);
          if (!grant) throw new CliError(`no grant with id ${id}`);
          revoked = await services.grants.lifecycle.revokeGrants([id], "operator");
        } else {
          revoked = await services.grants.lifecycle.revokeSubject(opts.user!, "operator");
        }
        if (opts.json) return printJson(io, { revoked });
        io.out(revoked.length === 0 ? "Nothing to revoke: no live grant matched.\n" : `Revoked ${revoked.length} grant(s): ${revoked.join(", ")}\n`);
      });
    });
}

export function registerGrantCommands(program: Command, io: CliIo): void {
  // "sessions" is the name the outside contract uses for the same thing: what a user signed in to.
  const grants = program.command("grants").alias("sessions").description("list and revoke grants (what a client may do for a user; alias: sessions)");
  listCommand(grants, io);
  revokeCommand(grants, io);
}
