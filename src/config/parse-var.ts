// How one plain variable is read: trimmed, empty meaning unset, checked by a zod schema, and on a
// mistake one line naming the variable, what it expects and what it got.
import { z } from "zod";
import { ConfigError, isPlainHttpUrl, type Env } from "./values.ts";

export function parseVar<T>(env: Env, name: string, schema: z.ZodType<T>, expectation: string): T {
  const raw = env[name];
  const value = raw === undefined || raw.trim() === "" ? undefined : raw.trim();
  const result = schema.safeParse(value);
  if (!result.success) {
    const got = value === undefined ? "it is not set" : `got ${JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)}`;
    throw new ConfigError(name, `expected ${expectation}, ${got}`);
  }
  return result.data;
}

export const intIn = (min: number, max: number, fallback: number) =>
  z
    .string()
    .regex(/^\d+$/)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .optional()
    .transform((v) => v ?? fallback);

export const bool = (fallback: boolean) =>
  z
    .enum(["true", "false", "1", "0", "yes", "no", "TRUE", "FALSE"])
    .optional()
    .transform((v) => (v === undefined ? fallback : ["true", "1", "yes", "TRUE"].includes(v)));

export const httpUrl = z
  .string()
  .refine(isPlainHttpUrl)
  .transform((v) => v.replace(/\/+$/, ""));
