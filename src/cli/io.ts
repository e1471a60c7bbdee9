// Where a CLI run reads its configuration and writes its output. The binary uses the process's;
// tests run the same program in-process with their own, so one command costs milliseconds
// instead of a process start.

export interface CliIo {
  /** Where `.env` is read and relative SQLite paths resolve. */
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  out(text: string): void;
  err(text: string): void;
  /** Ends a command that runs until stopped (`audit --follow`); without it, SIGINT (Ctrl-C) does. */
  readonly stop?: AbortSignal;
}

export const processIo: CliIo = {
  cwd: process.cwd(),
  env: process.env,
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};
