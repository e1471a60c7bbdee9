// Jest's runtime, with V8 coverage started once per worker instead of once per test file.
//
// Stock Jest (collect-v8-coverage) opens an inspector session around every test file: it enables
// the debugger, starts precise coverage, takes it and stops again. Enabling the debugger reports
// (and hashes) every script the worker holds, and each start walks the worker's whole heap; both
// grow as the worker ages (~0.4 s per file early on). V8's `takePreciseCoverage` resets the
// counters it returns, so one session started with the worker and one take at the end of each
// file give each file what ran since the previous file ended. Jest turns the result into its report
// unchanged (same collector, same source maps), and the figures are the stock ones.
//
// Coverage left on keeps every function's feedback alive, so a worker's heap grows with each file;
// jest.config.js's workerIdleMemoryLimit replaces a worker past 700 MB (that also helps without
// coverage: ESM modules are never unloaded). Measured on the whole suite, 2 workers: 290 s without
// coverage, 310 s with it (+7%). Without the replacement the same coverage took 445 s: workers grew to
// 2 GB and their last files ran up to 4x slower.
//
// Two more per-file costs go too. The take lists every script of the worker (~1,500, mostly
// node_modules that each file's registry loads again), and Jest matched each against the coverage
// globs: node_modules, which Jest's default coveragePathIgnorePatterns leaves out anyway, is dropped
// first. And each file sent the transformed and the original code of every source file it loaded
// (~5 MB) to the parent, which kept them all while using the first copy of a file only: a worker
// sends a file's code once. (If a file's result were lost after that — its environment failing to
// tear down — the parent would lack that code; the run is red then anyway.)
"use strict";

const { Session } = require("node:inspector");
const JestRuntime = require("jest-runtime").default;

/** One inspector session for the life of this worker, started on first use. */
let session;
let started;

function post(method, params) {
  return new Promise((resolve, reject) => {
    session.post(method, params, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

function startOnce() {
  if (!started) {
    session = new Session();
    session.connect();
    started = post("Profiler.enable").then(() => post("Profiler.startPreciseCoverage", { callCount: true, detailed: true }));
  }
  return started;
}

/** What collect-v8-coverage's instrumenter offers, minus the per-file start and stop. */
const sharedInstrumenter = {
  startInstrumenting: startOnce,
  async stopInstrumenting() {
    await startOnce();
    const { result } = await post("Profiler.takePreciseCoverage");
    return result;
  },
};

class CoverageOnceRuntime extends JestRuntime {
  collectV8Coverage() {
    const collector = this.v8Coverage;
    // Jest's collector keeps these two fields; fail loudly if an upgrade renames them rather
    // than report a silently empty coverage.
    if (!collector || !("instrumenter" in collector) || !("sources" in collector)) {
      throw new Error("test/support/coverage-runtime.cjs: jest-runtime's V8 collector changed shape; update this file or remove `runtime` from jest.config.js");
    }
    collector.instrumenter = sharedInstrumenter;
    collector.sources = new Map();
    return sharedInstrumenter.startInstrumenting();
  }
}

/** Source files whose transformed code this worker already sent to the parent. */
const sentTransforms = new Set();

CoverageOnceRuntime.prototype.getAllV8CoverageInfoCopy = function () {
  const collector = this.v8Coverage;
  if (collector.result) {
    collector.result = collector.result.filter((script) => !script.url.includes("/node_modules/"));
  }
  const entries = JestRuntime.prototype.getAllV8CoverageInfoCopy.call(this);
  for (const entry of entries) {
    if (!entry.codeTransformResult) continue;
    if (sentTransforms.has(entry.result.url)) entry.codeTransformResult = undefined;
    else sentTransforms.add(entry.result.url);
  }
  return entries;
};

module.exports = CoverageOnceRuntime;
module.exports.default = CoverageOnceRuntime;
