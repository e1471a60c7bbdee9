// An error as one line for a log field or a message: the first line says what went wrong; what
// follows (Prisma's source excerpts, stack-like detail) belongs to a debugger, not to an operator.

/** The first non-empty line of an error's message (Prisma's go on with source excerpts). */
export function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return (
    message
      .split("\n")
      .map((l) => l.trim())
      .find(Boolean) ?? "unknown error"
  );
}
