// `node bench/run.js --baseline=PATH --engines=quickjs-native-baseline` measures the baseline
// alone: it once ran the baseline twice and then threw while writing the report ("reading
// 'engine'": the table against the baseline read this checkout's results, which were not there).
import { describe, expect, it } from "vitest";
// @ts-expect-error: the bench is plain JavaScript, without type declarations
import { BASELINE_ID, withBaselineEngine } from "../../bench/engines/index.js";
// @ts-expect-error: as above
import { renderReport } from "../../bench/lib/report.js";

const row = { case: "eval-sync", status: "ok", medianUs: 4, p99Us: 6, opsPerSec: 250_000, samples: 100 };

function runOf(engines: string[]): object {
  return {
    quick: false,
    durationS: 1,
    machine: {
      date: "2026-12-03",
      cpu: "test CPU × 2",
      memory: "1 GiB",
      os: "Linux",
      node: "v20",
      v8: "11",
      loadAtStart: 0,
      loadAtEnd: 0,
    },
    results: engines.map((engine) => ({ engine, label: engine, rows: [row], problems: [] })),
  };
}

describe("a bench run of the baseline alone", () => {
  it("measures the baseline once", () => {
    expect(withBaselineEngine([BASELINE_ID])).toEqual([BASELINE_ID]);
    expect(withBaselineEngine(["wasm-ng-sync"])).toEqual([BASELINE_ID, "wasm-ng-sync"]);
    expect(withBaselineEngine(["quickjs-native", "wasm-ng-sync"])).toEqual([
      "quickjs-native",
      BASELINE_ID,
      "wasm-ng-sync",
    ]);
  });

  it("writes its report, with no table against a checkout that did not run", () => {
    const report: string = renderReport(runOf([BASELINE_ID]));
    expect(report).toContain("## Results by case");
    expect(report).not.toContain("## Against the baseline");
    expect(renderReport(runOf(["quickjs-native", BASELINE_ID]))).toContain("## Against the baseline");
  });
});
