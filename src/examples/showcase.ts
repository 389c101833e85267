/**
 * `npm start`: the documentation's seed example in a sandbox, with its console, timings and
 * memory, then the limits holding (a runaway loop and an oversized allocation).
 */
import { Sandbox, SandboxError } from "../index.js";

const SEED =
  'const rows=[{team:"alpha",score:8},{team:"beta",score:13},{team:"alpha",score:21}]; const totals=rows.reduce((acc,row)=>{acc[row.team]=(acc[row.team]??0)+row.score; console.log(`${row.team} score: ${acc[row.team]}`); return acc;},{}); totals;';

function describe(err: unknown): string {
  return err instanceof SandboxError ? `${err.code}: ${err.message}` : String(err);
}

const t0 = performance.now();
using sandbox = new Sandbox({ executionTimeoutMs: 100 });
const created = performance.now() - t0;

const report = sandbox.runSync(SEED);
console.log("code:     ", SEED);
for (const line of report.console) console.log(`console.${line.level}:`, line.text);
if (report.ok) console.log("value:    ", report.value);
console.log(
  `timings:   new Sandbox ${created.toFixed(2)} ms, eval ${report.stats.wallMs.toFixed(3)} ms (guest ${report.stats.executionMs.toFixed(3)} ms)`,
);
console.log(
  `memory:    ${(report.stats.memoryUsedBytes / 1024).toFixed(0)} KiB used, peak ${(report.stats.peakMemoryBytes / 1024).toFixed(0)} KiB`,
);

const asyncReport = await sandbox.run("await Promise.resolve(); totals.alpha + totals.beta");
console.log("async eval (off the main thread):", asyncReport.ok ? asyncReport.value : describe(asyncReport.error));

const spin = await sandbox.run("while (true) {}");
console.log("while(true){} with a 100 ms budget ->", spin.ok ? "finished?!" : describe(spin.error));
const big = await sandbox.run("new Uint8Array(200e6).length");
console.log("new Uint8Array(200e6) under 64 MiB ->", big.ok ? "allocated?!" : describe(big.error));
console.log("and the same sandbox still works: 1+1 =", sandbox.evalSync("1+1"));
