// Figures, not tests: snapshot and restore cost for a ~10 KB and a ~1 MB interpreter state, and
// snapshot size. Run after `npm run build`: node test/snapshot/bench-snapshot.mjs
// (QUICKJS_NATIVE_BINARY picks another build of the addon, as everywhere).
import { Sandbox } from "../../dist/index.js";

const signing = { key: "k".repeat(32), threadId: "bench-thread", turn: 1 };

// A state shaped like an agent's: rows of records, a lookup Map, a few functions and a class instance.
function stateScript(rows) {
  return `
    var data = Array.from({ length: ${rows} }, (_, i) => ({ id: i, name: "item " + i, score: i * 0.5, tags: ["a", "b"], seen: i % 2 === 0 }));
    const byId = new Map(data.map((r) => [r.id, r]));
    function score(r) { return r.score * 2 + (r.seen ? 1 : 0) }
    class Acc { constructor() { this.total = 0; this.count = 0 } add(x) { this.total += x; this.count++; return this } mean() { return this.total / this.count } }
    const acc = new Acc(); for (const r of data.slice(0, 10)) acc.add(score(r));
    undefined`;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function measure(label, rows, runs) {
  const sb = new Sandbox({ memoryLimitBytes: 256 * 1024 * 1024 });
  sb.evalSync(stateScript(rows));
  const snapMs = [],
    restoreMs = [],
    signedSnapMs = [],
    signedRestoreMs = [];
  let bytes, signedBytes;
  for (let i = 0; i < runs; i++) {
    let t = performance.now();
    bytes = sb.snapshot();
    snapMs.push(performance.now() - t);
    t = performance.now();
    const { sandbox } = Sandbox.restore(bytes, { memoryLimitBytes: 256 * 1024 * 1024 });
    restoreMs.push(performance.now() - t);
    if (sandbox.evalSync("acc.mean() > 0 && byId.get(3) === data[3]") !== true)
      throw new Error("restored state is wrong");
    sandbox.dispose();
    t = performance.now();
    signedBytes = sb.snapshot({ signing });
    signedSnapMs.push(performance.now() - t);
    t = performance.now();
    Sandbox.restore(signedBytes, { memoryLimitBytes: 256 * 1024 * 1024, signing }).sandbox.dispose();
    signedRestoreMs.push(performance.now() - t);
  }
  // Reference on the same state and machine load: the engine's own JSON round trip of `data`.
  const jsonMs = [];
  for (let i = 0; i < Math.min(runs, 20); i++) {
    const t = performance.now();
    sb.evalSync("JSON.parse(JSON.stringify(data)).length");
    jsonMs.push(performance.now() - t);
  }
  const zipMs = [],
    unzipMs = [];
  let zipped;
  for (let i = 0; i < Math.min(runs, 20); i++) {
    let t = performance.now();
    zipped = sb.snapshot({ signing, compress: true });
    zipMs.push(performance.now() - t);
    t = performance.now();
    Sandbox.restore(zipped, { memoryLimitBytes: 256 * 1024 * 1024, signing }).sandbox.dispose();
    unzipMs.push(performance.now() - t);
  }
  sb.dispose();
  const f = (x) => x.toFixed(3);
  console.log(
    `${label.padEnd(8)} rows=${String(rows).padStart(6)} bytes=${String(bytes.length).padStart(9)}  ` +
      `snapshot ${f(median(snapMs))} ms  restore ${f(median(restoreMs))} ms  turn ${f(median(snapMs) + median(restoreMs))} ms  ` +
      `| signed: snapshot ${f(median(signedSnapMs))} ms  restore ${f(median(signedRestoreMs))} ms  | guest JSON round trip of data ${f(median(jsonMs))} ms`,
  );
  console.log(
    `${"".padEnd(8)} signed+deflated: bytes=${zipped.length}  snapshot ${f(median(zipMs))} ms  restore ${f(median(unzipMs))} ms`,
  );
}

// Warm up the baseline global list and the code paths.
measure("warm-up", 10, 5);
measure("~10 KB", 120, 200);
measure("~1 MB", 12000, 15);
const empty = new Sandbox();
console.log(`empty sandbox snapshot: ${empty.snapshot().length} bytes`);
empty.dispose();
