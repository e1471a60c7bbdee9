// Runs each test file's first and last test alone (jest -t), to show that no test depends on
// state an earlier test of its file created: CONTRIBUTING's rule that any test can be run by itself.
// Usage: node scripts/check-tests-alone.mjs [test files…]   (all test files when none is given)
// Takes several minutes (two Jest runs per file, two at a time); not part of `npm test`.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const env = { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --experimental-vm-modules`.trim() };
const jest = path.resolve("node_modules/jest/bin/jest.js");
const work = mkdtempSync(path.join(tmpdir(), "mab-alone-"));

function run(args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [jest, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    child.on("close", (code) => resolve({ code, output }));
  });
}

const escapeRegExp = (name) => name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Every test file with its tests' full names, in order, without running any of them. */
async function listTests(files) {
  const out = path.join(work, "list.json");
  await run(["--json", `--outputFile=${out}`, "--testNamePattern", "^\\b$ matches no test", ...files]);
  const report = JSON.parse(readFileSync(out, "utf8"));
  return report.testResults
    .map((file) => ({ file: path.relative(process.cwd(), file.name), names: file.assertionResults.map((a) => a.fullName) }))
    .sort((a, b) => a.file.localeCompare(b.file));
}

async function alone(file, name) {
  const out = path.join(work, `${Math.random().toString(36).slice(2)}.json`);
  const { output } = await run(["--json", `--outputFile=${out}`, "--testNamePattern", `^${escapeRegExp(name)}$`, file]);
  let report;
  try {
    report = JSON.parse(readFileSync(out, "utf8"));
  } catch {
    return { ok: false, why: output.split("\n").slice(-20).join("\n") };
  }
  const results = report.testResults.flatMap((r) => r.assertionResults);
  const passed = results.filter((a) => a.status === "passed" && a.fullName === name).length;
  const failed = results.filter((a) => a.status === "failed");
  if (passed >= 1 && failed.length === 0 && report.success) return { ok: true };
  const why = failed.flatMap((a) => a.failureMessages).join("\n") || report.testResults.map((r) => r.message).join("\n") || "the test did not run";
  return { ok: false, why: why.split("\n").slice(0, 15).join("\n") };
}

const files = await listTests(process.argv.slice(2));
const jobs = [];
for (const { file, names } of files) {
  if (names.length === 0) continue;
  const picks = [...new Set([names[0], names[names.length - 1]])];
  for (const name of picks) jobs.push({ file, name });
}
const failures = [];
let next = 0;
async function worker() {
  while (next < jobs.length) {
    const job = jobs[next++];
    const result = await alone(job.file, job.name);
    process.stdout.write(`${result.ok ? "ok  " : "FAIL"} ${job.file} › ${job.name}\n`);
    if (!result.ok) failures.push({ ...job, why: result.why });
  }
}
await Promise.all([worker(), worker()]);
rmSync(work, { recursive: true, force: true });
for (const f of failures) process.stdout.write(`\n--- ${f.file} › ${f.name}\n${f.why}\n`);
process.stdout.write(`\n${jobs.length - failures.length} of ${jobs.length} tests passed alone (${files.length} files).\n`);
process.exit(failures.length === 0 ? 0 : 1);
