// What coverage costs the suite: the whole suite without coverage, then with it (as `npm test`
// runs it), each timed from start to exit.
// CONTRIBUTING's rule: coverage adds no more than 10%. Usage: node scripts/coverage-cost.mjs [rounds]
// Takes about 10 minutes a round on two cores; not part of `npm test` (a timing is no test).
import { spawn } from "node:child_process";
import path from "node:path";

const rounds = Number(process.argv[2] ?? 1);
const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --experimental-vm-modules`.trim() };
const jest = path.resolve("node_modules/jest/bin/jest.js");

/** One whole run: wall seconds, and whether it passed. */
function run(coverage) {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [jest, coverage ? "--coverage" : "--coverage=false"], { env, stdio: ["ignore", "ignore", "pipe"] });
    let tail = "";
    child.stderr.on("data", (d) => (tail = (tail + d).slice(-4000)));
    child.on("close", (code) => {
      resolve({ wall: Number(process.hrtime.bigint() - started) / 1e9, code, tail });
    });
  });
}

const results = { off: [], on: [] };
for (let round = 1; round <= rounds; round++) {
  for (const coverage of [false, true]) {
    const r = await run(coverage);
    if (r.code !== 0) {
      process.stderr.write(`${r.tail}\nThe suite failed (exit ${r.code}) ${coverage ? "with" : "without"} coverage: fix it before timing it.\n`);
      process.exit(1);
    }
    results[coverage ? "on" : "off"].push(r);
    process.stdout.write(`round ${round}, coverage ${coverage ? "on " : "off"}: ${r.wall.toFixed(1)} s wall\n`);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const off = median(results.off.map((r) => r.wall));
const on = median(results.on.map((r) => r.wall));
process.stdout.write(
  `median of ${rounds}: ${off.toFixed(1)} s without coverage, ${on.toFixed(1)} s with it: ${((on / off - 1) * 100).toFixed(1)}% (rule: ≤ +10%)\n`,
);
