// prepack (before prepare builds it): the tarball gets a dist/ built from the sources of this commit only (tsc never removes
// the output of a source file that was deleted or moved).
import { rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

rmSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../dist"), { recursive: true, force: true });
