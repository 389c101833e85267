// Cost of the interrupt polls patch 0007 adds to the Unicode built-ins: the median of 9 runs of
// each call in one sandbox (evalSync, 60 s budget), in ms. Compare two engines by running this once
// per binary: QUICKJS_NATIVE_BINARY=<path to quickjs_native.node> node bench/unicode-builtins.js
// On a shared machine read the processes' CPU time (whole process, alternating the two binaries),
// not these wall-clock figures: with a load average of 28 they swung by 1.5x between runs.
import { Sandbox } from "../dist/index.js";

const cases = {
  "toUpperCase of 2**22 accented letters": "s1.toUpperCase().length",
  "normalize('NFD') of 2**20 accented letters": "s2.normalize('NFD').length",
  "normalize() of 2**22 latin1 letters": "s3.normalize().length",
  "localeCompare of 2**20 accented letters": "s2.localeCompare(s2)",
};
const sb = new Sandbox({ memoryLimitBytes: 512 * 1024 * 1024, executionTimeoutMs: 60_000 });
sb.evalSync("var s1 = '\\u00e9'.repeat(2 ** 22), s2 = '\\u00e9'.repeat(2 ** 20), s3 = 'a'.repeat(2 ** 22); 0");
for (const [label, code] of Object.entries(cases)) {
  const times = [];
  for (let i = 0; i < 9; i++) {
    const t0 = process.hrtime.bigint();
    sb.evalSync(code);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`${label}: ${times[4].toFixed(2)} ms`);
}
sb.dispose();
