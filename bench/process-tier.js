#!/usr/bin/env node
// The process tier's costs beside the in-process tier, in one run (issue 30, item 6): each figure
// is the median of several samples, both tiers measured alternately in this one process, printed
// against its target as a Markdown table (on stdout; `--embedded` prints the table only, for
// bench/run.js's report).
//
//   node bench/process-tier.js [--samples=9] [--embedded]
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Sandbox } from "../dist/index.js";
import { guestSource } from "./workloads/sources.js";

const args = process.argv.slice(2);
const samples = Number(args.find((a) => a.startsWith("--samples="))?.slice(10) ?? 9);
const embedded = args.includes("--embedded");
const TIERS = ["in-process", "process"];

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Median over `samples` of the µs per operation of `run(n)`, which performs `n` operations. */
async function perOp(n, run) {
  const out = [];
  await run(Math.max(1, n >> 3)); // warm-up
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await run(n);
    out.push(((performance.now() - t) * 1000) / n);
  }
  return median(out);
}

function fresh(isolation, options = {}) {
  return new Sandbox({ isolation, ...options });
}

const cases = {
  async evalSync(isolation) {
    const s = fresh(isolation);
    const v = await perOp(2000, (n) => {
      for (let i = 0; i < n; i++) s.evalSync("1+1");
    });
    s.dispose();
    return v;
  },
  async evalAsync(isolation) {
    const s = fresh(isolation);
    const v = await perOp(1000, async (n) => {
      for (let i = 0; i < n; i++) await s.eval("1+1");
    });
    s.dispose();
    return v;
  },
  async syncHost(isolation) {
    const s = fresh(isolation);
    s.defineFunction("host", (i) => i + 1);
    const code = guestSource("sync-host-calls.js");
    const v = await perOp(1, () => s.evalSync(code));
    s.dispose();
    return v / 10000;
  },
  async awaitedHost(isolation) {
    const s = fresh(isolation);
    s.defineAsyncFunction("host", async (args) => args[0] + 1);
    const code = guestSource("async-host-calls.js");
    const v = await perOp(1, () => s.eval(code));
    s.dispose();
    return v / 10000;
  },
  async newSandbox(isolation) {
    const made = [];
    const v = await perOp(32, (n) => {
      for (let i = 0; i < n; i++) made.push(fresh(isolation));
    });
    for (const s of made) s.dispose();
    return v;
  },
  async transform(isolation) {
    const s = fresh(isolation);
    const code = guestSource("transform.js");
    const v = await perOp(1, () => s.evalSync(code));
    s.dispose();
    return v;
  },
  async rssPerIdle(isolation) {
    // 64 idle sandboxes (one helper's worth), each after one small eval; the growth of the resident
    // set that holds them (this process, or the helper process), per sandbox, in KiB.
    const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
    const partition = `rss-${Math.random()}`;
    const first = fresh(isolation, { partition });
    first.evalSync("1");
    const pid = first.processId ?? process.pid;
    globalThis.gc?.();
    const before = rssKiB(pid);
    const made = [first];
    for (let i = 1; i < 65; i++) {
      const s = fresh(isolation, { partition });
      s.evalSync("globalThis.x = 1");
      made.push(s);
    }
    globalThis.gc?.();
    const after = rssKiB(pid);
    for (const s of made) s.dispose();
    return (after - before) / 64;
  },
};

// RSS first: before the other cases, the in-process heap has no freed sandboxes to reuse.
const FIGURES = [
  ["RSS per idle sandbox (64 per helper)", "rssPerIdle", "KiB", (p, i) => p <= 2 * i, "≤ 2× in-process"],
  ['evalSync("1+1") round trip', "evalSync", "µs", (p) => p <= 25, "≤ 25 µs"],
  ['await eval("1+1")', "evalAsync", "µs", (p) => p <= 30, "≤ 30 µs"],
  ["sync host call from guest code", "syncHost", "µs", (p) => p <= 5, "≤ 5 µs"],
  ["awaited host call", "awaitedHost", "µs", (p) => p <= 15, "≤ 15 µs"],
  ["new sandbox from a warm pool", "newSandbox", "µs", (p) => p <= 300, "≤ 300 µs"],
  ["10k-object transform", "transform", "µs", (p, i) => p <= 1.1 * i, "≤ 1.1× in-process"],
];

const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const rows = [];
for (const [title, id, unit, meets, target] of FIGURES) {
  const value = {};
  for (const tier of TIERS) value[tier] = await cases[id](tier);
  const i = value["in-process"];
  const p = value.process;
  rows.push(
    `| ${title} | ${fmt(i)} ${unit} | ${fmt(p)} ${unit} | ${(p / i).toFixed(2)}× | ${target} | ${meets(p, i) ? "yes" : "**no**"} |`,
  );
  if (!embedded) process.stderr.write(`${title}: in-process ${fmt(i)} ${unit}, process ${fmt(p)} ${unit}\n`);
}
const table = [
  "| figure (median) | in-process | process | process / in-process | target (process) | met |",
  "|---|---|---|---|---|---|",
  ...rows,
].join("\n");
process.stdout.write(
  `${embedded ? table : `## Process tier against in-process (${samples} samples each)\n\n${table}`}\n`,
);
