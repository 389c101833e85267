#!/usr/bin/env node
// The paths an eval's request crosses, alone, for before/after comparisons of a change to the
// boundary: `node bench/eval-request-path.js [CHECKOUT] [--calls=N] [--runs=N]` loads CHECKOUT's
// build (dist/ and build/Release; default this checkout) and prints, for each path, the median
// over `runs` runs of the mean time per call of `calls` calls: `evalSync("1+1")`,
// `evalSync("1+1", { displayChars })`, `await eval("1+1")` (answered at once), and
// `new Sandbox()` + `dispose()`. Run it for two checkouts in alternating order (A B A B) and
// compare the medians: one process's figures move by several percent from one process to the next.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const root = resolve(args.find((a) => !a.startsWith("--")) ?? new URL("..", import.meta.url).pathname);
const option = (name, fallback) => Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const calls = option("calls", 200_000);
const runs = option("runs", 5);

const { Sandbox } = await import(pathToFileURL(`${root}/dist/index.js`).href);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function perCall(n, op) {
  await op(); // warm
  const samples = [];
  for (let run = 0; run < runs; run++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await op();
    samples.push(Number(process.hrtime.bigint() - started) / n);
  }
  return median(samples);
}

function perCallSync(n, op) {
  for (let i = 0; i < 1000; i++) op(); // warm
  const samples = [];
  for (let run = 0; run < runs; run++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) op();
    samples.push(Number(process.hrtime.bigint() - started) / n);
  }
  return median(samples);
}

const sb = new Sandbox();
const display = { displayChars: 2000 };
const results = {
  "evalSync(1+1) ns": perCallSync(calls, () => sb.evalSync("1+1")),
  "evalSync(1+1, displayChars) ns": perCallSync(calls, () => sb.evalSync("1+1", display)),
  "await eval(1+1) ns": await perCall(Math.ceil(calls / 10), () => sb.eval("1+1")),
  "new Sandbox + dispose ns": perCallSync(Math.ceil(calls / 100), () => new Sandbox().dispose()),
};
sb.dispose();
console.log(JSON.stringify({ root, calls, runs, ...Object.fromEntries(Object.entries(results).map(([k, v]) => [k, Math.round(v)])) }));
