// How the token, revocation and introspection handlers declare their parameters: one zod schema
// per handler, applied to the form as received. Parameters are checked in the order the schema
// declares them; the first problem becomes the domain error it names (invalid_request unless a
// domain rule, such as the resource check, says otherwise).
import { z } from "zod";
import { DomainError, isRequestErrorCode, requestError } from "../errors.ts";
import { resolveResource, type ProtectedResources } from "../resource.ts";
import type { FormParameters } from "../types.ts";

export type { FormParameters };

/** A parameter that must be present and not empty. */
export function required(name: string, message = `${name} is required.`) {
  return z.string({ error: message }).min(1, message);
}

/**
 * Lifts a domain rule (a function that throws a DomainError) into a schema step: its error becomes
 * the schema's issue, with its OAuth code, so that the declaration order still decides which
 * problem is reported first.
 */
export function rule<I, O>(fn: (value: I) => O): (value: I, ctx: z.core.$RefinementCtx<I>) => O {
  return (value, ctx) => {
    try {
      return fn(value);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      ctx.addIssue({ code: "custom", message: err.description, params: { error: err.code } });
      return z.NEVER;
    }
  };
}

/** RFC 8707 `resource`: absent, or the canonical resource URI of one of this broker's servers. */
export function optionalResource(resources: ProtectedResources) {
  return z
    .string()
    .optional()
    .transform(rule((value: string | undefined) => (value === undefined ? undefined : resolveResource(value, resources))));
}

/** The parameters a schema declares, parsed; throws the domain error of the first problem. */
export function parseParameters<S extends z.ZodType>(schema: S, params: FormParameters): z.output<S> {
  const result = schema.safeParse(params);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const code: unknown = issue.code === "custom" ? issue.params?.error : undefined;
  throw requestError(isRequestErrorCode(code) ? code : "invalid_request", issue.message);
}
