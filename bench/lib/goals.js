// The goals for quickjs-native, evaluated against one run's results.

const NATIVE = "quickjs-native";

function row(run, engine, caseId) {
  const result = run.results.find((r) => r.engine === engine);
  return result?.rows.find((r) => r.case === caseId && r.status === "ok");
}

function missing(run, engine, caseId) {
  const result = run.results.find((r) => r.engine === engine);
  if (!result) return `${engine} not run`;
  if (result.unavailable) return `${engine} unavailable: ${result.unavailable}`;
  const r = result.rows.find((x) => x.case === caseId);
  if (!r) return `${caseId} not measured${run.quick && caseId === "rss-10k" ? " (full run only)" : ""}`;
  return `${caseId} ${r.status}: ${r.reason}`;
}

/** Each goal: { goal, target, measured, status: "met"|"not met"|"not measured", detail } */
export function evaluateGoals(run) {
  const goals = [];
  const add = (goal, target, compute) => {
    try {
      const { value, text, met } = compute();
      goals.push({ goal, target, measured: text, status: met ? "met" : "not met", value });
    } catch (reason) {
      goals.push({ goal, target, measured: "—", status: "not measured", detail: String(reason.message ?? reason) });
    }
  };
  const need = (engine, caseId) => {
    const r = row(run, engine, caseId);
    if (!r) throw new Error(missing(run, engine, caseId));
    return r;
  };
  add("new session vs raw C", "≤ 1.5×", () => {
    const ratio = need(NATIVE, "session").medianUs / need("c-floor", "session").medianUs;
    return { value: ratio, text: `${ratio.toFixed(2)}×`, met: ratio <= 1.5 };
  });
  add("10k-object transform vs raw C", "≤ 1.2×", () => {
    const ratio = need(NATIVE, "transform").medianUs / need("c-floor", "transform").medianUs;
    return { value: ratio, text: `${ratio.toFixed(2)}×`, met: ratio <= 1.2 };
  });
  // Beside each per-call figure, raw C's from the same run (when the floor ran).
  const floorUs = (caseId, digits) => {
    const r = row(run, "c-floor", caseId);
    return r ? ` (raw C ${(r.medianUs / 10000).toFixed(digits)} µs)` : "";
  };
  add("sync host call", "≤ 0.3 µs per call", () => {
    const us = need(NATIVE, "sync-host").medianUs / 10000;
    return { value: us, text: `${us.toFixed(3)} µs${floorUs("sync-host", 3)}`, met: us <= 0.3 };
  });
  add("awaited async host call (off-thread eval)", "≤ 10 µs per call", () => {
    const us = need(NATIVE, "async-host").medianUs / 10000;
    return { value: us, text: `${us.toFixed(2)} µs${floorUs("async-host", 2)}`, met: us <= 10 };
  });
  add('`await eval("1+1")` (off-thread)', "≤ 12 µs", () => {
    const us = need(NATIVE, "eval-async").medianUs;
    return { value: us, text: `${us.toFixed(1)} µs`, met: us <= 12 };
  });
  add("trivial eval p99 while 8 sessions spin", "≤ 50 ms", () => {
    const r = need(NATIVE, "latency-spin");
    return { value: r.p99Ms, text: `${r.p99Ms.toFixed(1)} ms (p50 ${r.p50Ms.toFixed(2)} ms)`, met: r.p99Ms <= 50 };
  });
  add("eval tool call end to end vs @langchain/quickjs", "≥ 5× faster", () => {
    const speedup = need("langchain-quickjs", "eval-tool").medianUs / need(NATIVE, "eval-tool").medianUs;
    return { value: speedup, text: `${speedup.toFixed(1)}× faster`, met: speedup >= 5 };
  });
  add("RSS per live session", "≤ 300 KB", () => {
    const r = row(run, NATIVE, "rss-10k") ?? need(NATIVE, "rss-100");
    return {
      value: r.perSessionKB,
      text: `${r.perSessionKB.toFixed(0)} KB (${r.sessions.toLocaleString("en-US")} sessions)`,
      met: r.perSessionKB <= 300,
    };
  });
  add('`await eval("1+1")`, every batch of 200 (fresh, and after spinners)', "≤ 15 µs per batch median", () => {
    const r = need(NATIVE, "batch-spread");
    const span = (x) => `${x.minUs.toFixed(1)}–${x.maxUs.toFixed(1)} µs`;
    return {
      value: r.worstUs,
      text: `${span(r.fresh)} (after spinners ${span(r.afterSpinners)})`,
      met: r.worstUs <= 15,
    };
  });
  add("trivial eval's wait with more spinning sessions than the executor-thread cap", "≤ 50 ms, every eval", () => {
    const r = need(NATIVE, "past-cap");
    return {
      value: r.maxMs,
      text: `max ${r.maxMs.toFixed(1)} ms (p50 ${r.p50Ms.toFixed(2)} ms; ${r.spinners} spinners, cap ${r.cap})`,
      met: r.maxMs <= 50,
    };
  });
  add("eval wall time beside 2 busy processes, off-thread vs main thread", "≤ 1.5×", () => {
    const r = need(NATIVE, "busy-host");
    return {
      value: r.ratio,
      text: `${r.ratio.toFixed(2)}× (${r.offThreadMs.toFixed(0)} / ${r.syncMs.toFixed(0)} ms)`,
      met: r.ratio <= 1.5,
    };
  });
  add("event-loop p99 while 2 guests spin", "≤ 5 ms", () => {
    const r = need(NATIVE, "event-loop");
    return { value: r.p99Ms, text: `${r.p99Ms.toFixed(2)} ms`, met: r.p99Ms <= 5 };
  });
  return goals;
}
