#!/usr/bin/env node
// The operator CLI. The sources are TypeScript run through tsx, like `npm start`.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
