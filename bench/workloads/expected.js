// Expected guest results, computed here in Node from the very same guest sources, so every
// engine's answer is checked and an engine that skips work fails instead of looking fast.
import { deepStrictEqual, strictEqual } from "node:assert";
import vm from "node:vm";
import { guestSource } from "./sources.js";
import { HOST_CALL_SUM } from "./host-functions.js";
import { LOOKUP_RESULT } from "./fake-tool.js";

let transformTotals;

/** Per-team totals the transform workload must produce. */
export function expectedTransform() {
  transformTotals ??= JSON.parse(JSON.stringify(vm.runInNewContext(guestSource("transform.js"))));
  return transformTotals;
}

/** Checks for each timed case, keyed by case id; each receives the value of the last operation. */
export function checkFor(caseId, { jsonInput } = {}) {
  switch (caseId) {
    case "eval-sync":
    case "eval-async":
      return (v) => strictEqual(v, 2);
    case "transform":
      return (v) => deepStrictEqual(JSON.parse(JSON.stringify(v)), expectedTransform());
    case "sync-host":
    case "async-host":
      return (v) => strictEqual(v, HOST_CALL_SUM);
    case "json":
      return (v) => strictEqual(v, jsonInput);
    case "eval-tool":
      return (v) => {
        const text = typeof v === "string" ? v : JSON.stringify(v);
        if (!text.includes(LOOKUP_RESULT)) throw new Error(`eval tool answered ${text.slice(0, 200)}`);
      };
    default:
      return undefined;
  }
}
