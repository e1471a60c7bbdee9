// oidc-provider warns on import that it prefers Node 22 (it works on Node 20, which this project
// runs on; the broker itself turns the warning into a debug log). Keep test output for real problems.
const warn = console.warn.bind(console);
console.warn = (...args: unknown[]) => {
  if (typeof args[0] === "string" && args[0].includes("oidc-provider WARNING: Unsupported runtime")) return;
  warn(...args);
};
