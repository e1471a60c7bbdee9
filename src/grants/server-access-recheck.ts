// At an upstream re-check the global policy admitted the user again; each grant of the session is
// then decided against the server it was granted for (serverAccess): a grant whose server's rules
// no longer admit the user — they left the group, or the operator narrowed the rules — or whose
// server left the catalogue, ends here, audited, while the session's other grants live on.
import { serverByResource } from "../config/catalogue.ts";
import { dateOf } from "../lib/clock.ts";
import { audit } from "./audit.ts";
import type { GrantsContext } from "./context.ts";
import type { GrantLifecycle } from "./lifecycle.ts";
import { liveGrantWhere } from "./live-grants.ts";
import type { IdentityFacts } from "./policy.ts";
import { grantAccess, grantsNeedServerCheck } from "./server-access.ts";

/**
 * Ends the live grants of the upstream session whose server refuses the user these facts describe.
 * Returns how many ended; `refused` is told once when any did (metrics).
 */
export async function endGrantsServersRefuse(
  ctx: GrantsContext,
  lifecycle: GrantLifecycle,
  session: { readonly id: string; readonly subject: string },
  facts: IdentityFacts,
  refused: () => void,
): Promise<number> {
  const { catalogue } = ctx.config;
  // A catalogue of one from the environment, without rules, refuses nobody the policy admitted.
  if (!grantsNeedServerCheck(catalogue)) return 0;
  const grants = await ctx.db.grant.findMany({
    where: { upstreamSessionId: session.id, ...liveGrantWhere(dateOf(ctx.clock)) },
    select: { id: true, clientId: true, resource: true },
  });
  const ending = grants.flatMap((grant) => {
    const decision = grantAccess(ctx, grant.resource, facts);
    return decision.admitted ? [] : [{ grant, server: serverByResource(catalogue, grant.resource)?.name ?? null, decision }];
  });
  if (ending.length === 0) return 0;
  for (const { grant, server, decision } of ending) {
    ctx.logger.warn(
      { subject: session.subject, login: facts.login, grantId: grant.id, server, refusedBy: decision.refusedBy },
      "a server's access rules no longer admit this user: its grant revoked",
    );
    await audit(ctx.db, {
      type: "access.policy_denied",
      subject: session.subject,
      clientId: grant.clientId,
      grantId: grant.id,
      detail: {
        upstreamSession: session.id,
        reason: "server_access_denied",
        refusedBy: decision.refusedBy,
        server,
        resource: grant.resource,
        login: facts.login,
      },
    });
  }
  refused();
  return (
    await lifecycle.revokeGrants(
      ending.map((e) => e.grant.id),
      "server_access_denied",
    )
  ).length;
}
