// Output for humans (aligned columns) or scripts (--json), and errors with exit codes.

import type { Command } from "commander";
import type { CliIo } from "./io.ts";

/** A subcommand with the --json switch every command offers to scripts. */
export function jsonCommand(parent: Command, name: string, description: string): Command {
  return parent.command(name).description(description).option("--json", "machine-readable output");
}

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = "CliError";
  }
}

export function printJson(io: CliIo, value: unknown): void {
  io.out(`${JSON.stringify(value, null, 2)}\n`);
}

export function printTable(io: CliIo, rows: ReadonlyArray<Record<string, string>>, empty: string): void {
  if (rows.length === 0) {
    io.out(`${empty}\n`);
    return;
  }
  const columns = Object.keys(rows[0]!);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => cell.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  io.out(`${line(columns.map((c) => c.toUpperCase()))}\n`);
  for (const row of rows) io.out(`${line(columns.map((c) => row[c] ?? ""))}\n`);
}

export function printFields(io: CliIo, fields: Record<string, string>): void {
  const width = Math.max(...Object.keys(fields).map((k) => k.length));
  for (const [k, v] of Object.entries(fields)) io.out(`${(`${k}:`).padEnd(width + 1)} ${v}\n`);
}

export function iso(date: Date | null | undefined): string {
  return date ? date.toISOString() : "-";
}
