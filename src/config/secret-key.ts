// SECRET_KEY and SECRET_KEY_PREVIOUS: the key material for cookies and encryption at rest, and the
// keys rotated out that still read old rows. Demo mode makes one and keeps it in the data folder.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DataFolderError, dataFolderProblem } from "./data-folder.ts";
import { commaList, ConfigError, type Env } from "./values.ts";

/** Decodes SECRET_KEY given as hex or base64/base64url; null when neither yields 32+ bytes. */
export function decodeSecretKey(value: string): Buffer | null {
  if (/^[0-9a-fA-F]+$/.test(value) && value.length % 2 === 0) {
    const hex = Buffer.from(value, "hex");
    if (hex.length >= 32) return hex;
  }
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) {
    const b64 = Buffer.from(value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (b64.length >= 32) return b64;
  }
  return null;
}

const secretKeyExpectation =
  "at least 32 bytes of key material as hex (64+ hex digits) or base64 (44+ characters); generate one with: node -e \"console.log(require('crypto').randomBytes(32).toString('base64'))\"";

function loadOrCreateDemoSecret(dataDir: string): Buffer {
  const file = path.join(dataDir, "secret.key");
  if (existsSync(file)) {
    const key = decodeSecretKey(readFileSync(file, "utf8").trim());
    if (!key) throw new ConfigError("SECRET_KEY", `the demo key file ${file} is corrupt; delete it and start again`);
    return key;
  }
  const key = randomBytes(32);
  try {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600 });
  } catch (err) {
    const problem = dataFolderProblem(dataDir, err as NodeJS.ErrnoException);
    throw new DataFolderError(problem!);
  }
  return key;
}

export interface SecretKeyOptions {
  readonly demoMode: boolean;
  readonly dataDir: string;
  /** Demo mode without SECRET_KEY: keep the key under the data folder (true), or use a throwaway one (a dry run). */
  readonly createDemoSecret: boolean;
}

export function parseSecretKeys(env: Env, options: SecretKeyOptions): { readonly secretKey: Buffer; readonly previousSecretKeys: readonly Buffer[] } {
  let secretKey: Buffer;
  const secretRaw = env.SECRET_KEY?.trim();
  if (secretRaw) {
    const key = decodeSecretKey(secretRaw);
    if (!key) throw new ConfigError("SECRET_KEY", `expected ${secretKeyExpectation}, got a value that decodes to fewer than 32 bytes`);
    secretKey = key;
  } else if (options.demoMode) {
    secretKey = options.createDemoSecret ? loadOrCreateDemoSecret(options.dataDir) : randomBytes(32);
  } else {
    throw new ConfigError("SECRET_KEY", `expected ${secretKeyExpectation} (required outside demo mode), it is not set`);
  }

  const previousSecretKeys = commaList(env.SECRET_KEY_PREVIOUS).map((v) => {
    const key = decodeSecretKey(v);
    if (!key) throw new ConfigError("SECRET_KEY_PREVIOUS", `expected a comma-separated list of earlier SECRET_KEY values (${secretKeyExpectation})`);
    return key;
  });
  return { secretKey, previousSecretKeys };
}
