// Timing of one benchmark case with tinybench, reduced to the numbers the report needs.
import { Bench } from "tinybench";

/** Time budgets: --quick is a smoke run that must finish in well under a minute overall. */
export function budgets(quick) {
  return quick
    ? { time: 100, iterations: 2, warmupTime: 20, warmupIterations: 1 }
    : { time: 1500, iterations: 10, warmupTime: 200, warmupIterations: 3 };
}

/**
 * Runs `fn` (sync or async) repeatedly and returns latency statistics in microseconds.
 * `check` receives the value of the last call so a wrong or cheating engine fails the case
 * instead of producing a flattering number.
 */
export async function measure(name, fn, { quick, check }) {
  let last;
  const bench = new Bench({ ...budgets(quick), throws: true });
  const isAsync = fn.constructor.name === "AsyncFunction";
  bench.add(
    name,
    isAsync
      ? async () => {
          last = await fn();
        }
      : () => {
          last = fn();
        },
    { async: isAsync },
  );
  await bench.run();
  const result = bench.tasks[0].result;
  if (result.state !== "completed") throw result.error ?? new Error(`tinybench state ${result.state}`);
  if (check) check(last);
  const ms = result.latency;
  return {
    medianUs: ms.p50 * 1000,
    p99Us: ms.p99 * 1000,
    meanUs: ms.mean * 1000,
    opsPerSec: 1000 / ms.p50,
    samples: ms.samplesCount,
  };
}
