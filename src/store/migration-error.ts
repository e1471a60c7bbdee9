/** A migration the Prisma CLI could not apply; the message says which and why. */
export class MigrationError extends Error {}
