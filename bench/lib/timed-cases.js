// The timed cases (a)-(f), (i), (j) for one engine adapter, in one process.
import { guestSource } from "../workloads/sources.js";
import { hostAsync, hostSync } from "../workloads/host-functions.js";
import { checkFor } from "../workloads/expected.js";
import { makeJsonInput } from "../workloads/json-input.js";
import { measure } from "./measure.js";

const isThenable = (v) => typeof v?.then === "function";

/** Rows of guest state that make roughly `bytes` of data (about 100 bytes a row as JSON). */
function stateRows(bytes) {
  return Math.max(1, Math.round(bytes / 100));
}

/** Guest statement leaving `rows` rows of plain data in the session (for snapshots). */
function stateSource(rows) {
  return `globalThis.state = Array.from({ length: ${rows} }, (_, i) => ({ id: i, label: "row-" + i, text: "x".repeat(64) })); 0`;
}

/**
 * Each entry sets up one case against an adapter and resolves to `{ op, note?, teardown? }`
 * (the operation to time) or `{ skip: reason, teardown? }`.
 */
const RUNNERS = {
  async session({ adapter }) {
    // Sync engines are timed without an await so no microtask hop is added to their cost.
    const first = adapter.createSession();
    (await first).dispose();
    const op = isThenable(first)
      ? async () => (await adapter.createSession()).dispose()
      : () => adapter.createSession().dispose();
    return { op };
  },

  async "eval-sync"({ adapter }) {
    const s = await adapter.createSession();
    if (!s.evalSync) return { skip: "no synchronous eval", teardown: () => s.dispose() };
    const code = guestSource("one-plus-one.js");
    return { op: () => s.evalSync(code), teardown: () => s.dispose() };
  },

  async "eval-async"({ adapter }) {
    const s = await adapter.createSession();
    const code = guestSource("one-plus-one.js");
    return { op: async () => s.evalAsync(code), teardown: () => s.dispose() };
  },

  async transform({ adapter }) {
    const s = await adapter.createSession();
    const code = guestSource("transform.js");
    return {
      op: s.evalSync ? () => s.evalSync(code) : async () => s.evalAsync(code),
      note: s.evalSync ? undefined : "async eval (the engine has no sync eval)",
      teardown: () => s.dispose(),
    };
  },

  async "sync-host"({ adapter }) {
    const s = await adapter.createSession({ sync: { host: hostSync } });
    const code = guestSource("sync-host-calls.js");
    return { op: () => s.evalSync(code), teardown: () => s.dispose() };
  },

  async "async-host"({ adapter }) {
    const s = await adapter.createSession({ async: { host: hostAsync } });
    const code = guestSource("async-host-calls.js");
    return { op: async () => s.evalAsync(code, { awaitResult: true }), teardown: () => s.dispose() };
  },

  async json({ adapter, jsonInput }) {
    const s = await adapter.createSession();
    const code = guestSource("json-roundtrip.js");
    const op = s.evalSync
      ? () => {
          s.setString("input", jsonInput);
          return s.evalSync(code);
        }
      : async () => {
          s.setString("input", jsonInput);
          return s.evalAsync(code);
        };
    return {
      op,
      note: s.evalSync ? undefined : "async eval (the engine has no sync eval)",
      teardown: () => s.dispose(),
    };
  },

  async "eval-tool"({ adapter }) {
    if (!adapter.createEvalTool) return { skip: "no LangChain eval-tool middleware for this engine" };
    let evalTool;
    try {
      evalTool = await adapter.createEvalTool();
    } catch (error) {
      return { skip: error.message };
    }
    const code = guestSource("eval-tool-call.js");
    return { op: async () => evalTool.invoke(code), teardown: () => evalTool.dispose() };
  },

  "snapshot-10k": ({ adapter }) => snapshotRunner(adapter, 10 * 1024),
  "snapshot-1m": ({ adapter }) => snapshotRunner(adapter, 1024 * 1024),
};

async function snapshotRunner(adapter, bytes) {
  const s = await adapter.createSession();
  if (!s.snapshot || !s.restore) {
    s.dispose();
    return { skip: "no snapshot/restore API" };
  }
  const rows = stateRows(bytes);
  const evalAny = (session, code) => (session.evalSync ? session.evalSync(code) : session.evalAsync(code));
  await evalAny(s, stateSource(rows));
  const bytesOrPromise = s.snapshot();
  const snapshotBytes = (await bytesOrPromise).byteLength;
  const restored = s.restore(await bytesOrPromise);
  // The restored session must hold the state, or the case measures nothing.
  const check = `state.length === ${rows} && state[${rows - 1}].label === "row-${rows - 1}"`;
  const holds = await evalAny(await restored, check);
  (await restored).dispose();
  if (holds !== true) throw new Error("the restored session does not hold the snapshotted state");
  const op =
    isThenable(bytesOrPromise) || isThenable(restored)
      ? async () => (await s.restore(await s.snapshot())).dispose()
      : () => s.restore(s.snapshot()).dispose();
  const size =
    snapshotBytes >= 1024 * 1024
      ? `${(snapshotBytes / 1024 / 1024).toFixed(2)} MB`
      : `${(snapshotBytes / 1024).toFixed(1)} KB`;
  return {
    op,
    note: `${rows.toLocaleString("en-US")} rows of guest state; snapshot is ${size}`,
    teardown: () => s.dispose(),
  };
}

/** Timed case ids in run order. */
export const TIMED_CASE_IDS = Object.keys(RUNNERS);

/**
 * The cases run again with the OpenTelemetry SDK registered (child mode `otel`), each reported as
 * `<id>-otel`: what telemetry costs an eval, a host call and an eval tool call when traced.
 */
export const OTEL_CASE_IDS = ["eval-sync", "sync-host", "eval-tool"];

/**
 * Runs the timed cases `ids` (default: every one) for `adapter`, each row's case id followed by
 * `suffix`; never throws for a case: failures and skips become result rows with their reason.
 * `onProgress(row)` is called after each case.
 */
export async function runTimedCases(adapter, { quick, onProgress, ids = TIMED_CASE_IDS, suffix = "" }) {
  const jsonInput = makeJsonInput();
  const rows = [];
  for (const id of ids) {
    let row;
    const reason = adapter.unsupported?.[id];
    if (reason) {
      row = { case: id, status: "skipped", reason };
    } else {
      let teardown;
      try {
        const plan = await RUNNERS[id]({ adapter, jsonInput });
        teardown = plan.teardown;
        if (plan.skip) {
          row = { case: id, status: "skipped", reason: plan.skip };
        } else {
          const stats = await measure(id, plan.op, { quick, check: checkFor(id, { jsonInput }) });
          row = { case: id, status: "ok", ...stats, ...(plan.note ? { note: plan.note } : {}) };
        }
      } catch (error) {
        row = {
          case: id,
          status: "failed",
          reason: String(error?.message ?? error)
            .split("\n")[0]
            .slice(0, 300),
        };
      } finally {
        try {
          await teardown?.();
        } catch {
          // A failed teardown must not hide the case's own result.
        }
      }
    }
    row.case += suffix;
    rows.push(row);
    onProgress?.(row);
  }
  return rows;
}
