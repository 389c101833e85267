#!/usr/bin/env node
// Case (j) "snapshot + restore, 1 MB state" split into its phases, for before/after comparisons:
// `node --expose-gc bench/snapshot-phases.js [CHECKOUT] [--rounds=N]` loads CHECKOUT's build
// (dist/ and build/Release; default this checkout), fills a sandbox with the case's ~1 MB of
// guest state, then times `sb.snapshot()`, `Sandbox.restore(bytes)` and the restored sandbox's
// `dispose()` apart, and prints the median of each as wall µs and as the process's CPU µs (user +
// system, all threads: on a loaded machine the wall time also counts the waits for a core). Run it
// for two builds in alternating order (A B A B) and compare the medians.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const root = resolve(args.find((a) => !a.startsWith("--")) ?? new URL("..", import.meta.url).pathname);
const rounds = Number(args.find((a) => a.startsWith("--rounds="))?.slice("--rounds=".length) ?? 60);
const ROWS = 10_486; // bench/lib/timed-cases.js stateRows(1 MB)

const { Sandbox } = await import(pathToFileURL(`${root}/dist/index.js`).href);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const sb = new Sandbox();
sb.evalSync(
  `globalThis.state = Array.from({ length: ${ROWS} }, (_, i) => ({ id: i, label: "row-" + i, text: "x".repeat(64) })); 0`,
);
const phases = { snapshot: [[], []], restore: [[], []], dispose: [[], []] };
/** Runs `fn`, adding its wall and CPU µs to `phases[name]`; returns its value. */
function timed(name, fn) {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const value = fn();
  phases[name][0].push((performance.now() - started) * 1000);
  const used = process.cpuUsage(cpu);
  phases[name][1].push(used.user + used.system);
  return value;
}
for (let i = 0; i < rounds + 5; i++) {
  if (i === 5) for (const p of Object.values(phases)) for (const list of p) list.length = 0; // warm-up
  const bytes = timed("snapshot", () => sb.snapshot());
  const { sandbox } = timed("restore", () => Sandbox.restore(bytes));
  timed("dispose", () => sandbox.dispose());
}
sb.dispose();
const out = { checkout: root, rounds };
for (const [name, [wall, cpu]] of Object.entries(phases)) {
  out[`${name}Us`] = Math.round(median(wall));
  out[`${name}CpuUs`] = Math.round(median(cpu));
}
console.log(JSON.stringify(out));
