// The installed package's folder (package.json, prisma/ and node_modules/ beside src/ or dist/).
import path from "node:path";
import { fileURLToPath } from "node:url";

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
