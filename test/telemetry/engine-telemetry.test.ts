import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox, TELEMETRY_CHANNELS, type UsageRecord } from "../../src/index.js";
import { parentOf, registerOtel, type OtelHarness } from "./support.js";

let otel: OtelHarness | undefined;
const sandboxes: Sandbox[] = [];
afterEach(async () => {
  for (const s of sandboxes.splice(0)) s.dispose();
  await otel?.close();
  otel = undefined;
});

function sandbox(options: ConstructorParameters<typeof Sandbox>[0] = {}): Sandbox {
  const sb = new Sandbox(options);
  sandboxes.push(sb);
  return sb;
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("OpenTelemetry spans and metrics of the engine", () => {
  it("an eval's span has the outcome, budgets and counts, and its host calls' spans nest below it with the GenAI attributes", async () => {
    otel = registerOtel();
    const sb = sandbox();
    sb.defineFunction("add", (a: unknown, b: unknown) => (a as number) + (b as number));
    sb.defineAsyncFunction("lookup", async ([id]) =>
      trace.getTracer("test").startActiveSpan("lookup-db", (span) => {
        span.end();
        return `row ${String(id)}`;
      }),
    );
    const secret = "const secretValue = 'hunter2';";
    const code = `${secret} add(1, 2) + (await lookup(7)).length`;
    expect(await sb.eval(code, { tenant: "acme" })).toBe(8);
    const spans = otel.spans();
    const evalSpan = spans.find((s) => s.name === "quickjs_native.eval")!;
    expect(evalSpan.attributes).toMatchObject({
      "quickjs_native.outcome": "OK",
      "quickjs_native.tier": "in-process",
      "quickjs_native.host_calls": 2,
      "quickjs_native.code.length": code.length,
    });
    expect(evalSpan.attributes["quickjs_native.memory.peak_bytes"]).toBeGreaterThan(0);
    expect(typeof evalSpan.attributes["quickjs_native.execution_ms"]).toBe("number");
    expect(typeof evalSpan.attributes["quickjs_native.wall_ms"]).toBe("number");
    // The tenant is hashed, and neither the code nor a value is on any span.
    expect(evalSpan.attributes["quickjs_native.tenant.hash"]).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toMatch(/acme|hunter2|row 7/);
    const calls = spans.filter((s) => s.attributes["gen_ai.operation.name"] === "execute_tool");
    expect(calls.map((s) => s.attributes["gen_ai.tool.name"]).sort()).toEqual(["add", "lookup"]);
    for (const call of calls) {
      expect(parentOf(call)).toBe(evalSpan.spanContext().spanId);
      expect(call.attributes["gen_ai.tool.call.id"]).toMatch(/^\d+\.\d+$/);
    }
    const inner = spans.find((s) => s.name === "lookup-db")!;
    expect(parentOf(inner)).toBe(
      calls.find((s) => s.attributes["gen_ai.tool.name"] === "lookup")!.spanContext().spanId,
    );
  });

  it("evalSync gets a span too, and a failed eval's span carries its error code", async () => {
    otel = registerOtel();
    const sb = sandbox();
    expect(sb.evalSync("1 + 1")).toBe(2);
    expect(() => sb.evalSync("throw new TypeError('no')")).toThrow();
    await null; // spans are handed to the SDK once the caller's synchronous work is done
    const spans = otel.spans().filter((s) => s.name === "quickjs_native.evalSync");
    expect(spans.map((s) => s.attributes["quickjs_native.outcome"])).toEqual(["OK", "GUEST_ERROR"]);
    expect(spans[1]!.attributes["error.type"]).toBe("GUEST_ERROR");
  });

  it("counts evals by outcome: one TIMEOUT and one success", async () => {
    otel = registerOtel();
    const sb = sandbox();
    await expect(sb.eval("while (true) {}", { timeoutMs: 50 })).rejects.toMatchObject({ code: "TIMEOUT" });
    expect(await sb.eval("40 + 2")).toBe(42);
    const counts = await otel.metric("quickjs_native.evals");
    expect(counts.map(([a, v]) => [a["quickjs_native.outcome"], v]).sort()).toEqual([
      ["OK", 1],
      ["TIMEOUT", 1],
    ]);
    const durations = await otel.metric("quickjs_native.eval.duration");
    expect(durations.reduce((n, [, count]) => n + count, 0)).toBe(2);
    expect((await otel.metric("quickjs_native.eval.queue.duration"))[0]![1]).toBe(2);
    expect((await otel.metric("quickjs_native.sandbox.count"))[0]![1]).toBeGreaterThanOrEqual(1);
    expect((await otel.metric("quickjs_native.memory.usage"))[0]![1]).toBeGreaterThan(0);
    expect((await otel.metric("quickjs_native.eval.pending"))[0]![1]).toBe(0);
  });

  it("evalSync is counted by outcome and timed, and records no queue wait (it never queues)", async () => {
    otel = registerOtel();
    const sb = sandbox();
    for (let i = 0; i < 3; i++) expect(sb.evalSync("1 + 1")).toBe(2);
    expect(() => sb.evalSync("throw new Error('no')")).toThrow();
    const counts = await otel.metric("quickjs_native.evals");
    expect(counts.map(([a, v]) => [a["quickjs_native.outcome"], a["quickjs_native.tier"], v]).sort()).toEqual([
      ["GUEST_ERROR", "in-process", 1],
      ["OK", "in-process", 3],
    ]);
    const durations = await otel.metric("quickjs_native.eval.duration");
    expect(durations.reduce((n, [, count]) => n + count, 0)).toBe(4);
    expect(await otel.metric("quickjs_native.eval.queue.duration")).toEqual([]);
  });

  it("a second SDK registered later counts only the evals it saw", async () => {
    otel = registerOtel();
    sandbox().evalSync("1");
    await otel.close();
    otel = registerOtel();
    sandbox().evalSync("2");
    expect((await otel.metric("quickjs_native.evals")).map(([, v]) => v)).toEqual([1]);
  });

  it("snapshot and restore have spans with their bytes", async () => {
    otel = registerOtel();
    const sb = sandbox();
    sb.evalSync("var kept = [1, 2, 3]");
    const bytes = await sb.snapshotAsync();
    const { sandbox: restored } = await Sandbox.restoreAsync(bytes);
    sandboxes.push(restored);
    const named = (name: string) => otel!.spans().filter((s) => s.name === name);
    expect(named("quickjs_native.snapshot")[0]!.attributes["quickjs_native.bytes"]).toBe(bytes.length);
    expect(named("quickjs_native.restore")[0]!.attributes["quickjs_native.bytes"]).toBe(bytes.length);
  });

  it("no SDK registered: evals run and no span is recorded", async () => {
    const sb = sandbox();
    expect(await sb.eval("1 + 1")).toBe(2);
    otel = registerOtel();
    expect(otel.spans()).toEqual([]);
  });
});

describe("diagnostics_channel events", () => {
  it("publishes eval start/end and host-call start/end, without code or values", async () => {
    const seen: [string, Record<string, unknown>][] = [];
    const listeners = Object.values(TELEMETRY_CHANNELS).map(
      (name) => [name, (message: unknown) => seen.push([name, message as Record<string, unknown>])] as const,
    );
    for (const [name, fn] of listeners) subscribe(name, fn);
    try {
      const sb = sandbox();
      sb.defineFunction("twice", (x: unknown) => (x as number) * 2);
      expect(sb.evalSync("twice(21)")).toBe(42);
    } finally {
      for (const [name, fn] of listeners) unsubscribe(name, fn);
    }
    expect(seen.map(([name]) => name)).toEqual([
      TELEMETRY_CHANNELS.evalStart,
      TELEMETRY_CHANNELS.hostCallStart,
      TELEMETRY_CHANNELS.hostCallEnd,
      TELEMETRY_CHANNELS.evalEnd,
    ]);
    expect(seen[1]![1]).toMatchObject({ name: "twice" });
    expect(seen[2]![1]).toMatchObject({ name: "twice", ok: true });
    expect(seen[3]![1]).toMatchObject({ kind: "evalSync", outcome: "OK", hostCalls: 1, codeLength: 9 });
    expect(JSON.stringify(seen)).not.toContain("twice(21)");
  });
});

describe("usage records (onUsage)", () => {
  it("100 evals' records sum to the CPU and host-call totals of their reports", async () => {
    const records: UsageRecord[] = [];
    const sb = sandbox({ onUsage: (r) => records.push(r) });
    sb.defineFunction("add", (a: unknown, b: unknown) => (a as number) + (b as number));
    sb.defineAsyncFunction("fetchRow", async ([i]) => ({ row: i }));
    let cpuMicros = 0;
    let hostCalls = 0;
    for (let i = 0; i < 100; i++) {
      const code = `var s = 0; for (let j = 0; j < ${i % 7}; j++) s = add(s, j); ${i % 3 === 0 ? "(await fetchRow(1)).row + s" : "s"}`;
      const report =
        i % 2 === 0
          ? await sb.run(code, { tenant: `t${i % 2}` })
          : sb.runSync(code.replace(/\(await fetchRow\(1\)\)\.row/, "1"), { tenant: `t${i % 2}` });
      expect(report.ok).toBe(true);
      cpuMicros += report.stats.executionMs * 1000;
      hostCalls += report.stats.hostCalls;
    }
    // Delivered after the eval, not during it.
    expect(records.length).toBeLessThan(100);
    await nextTurn();
    expect(records).toHaveLength(100);
    expect(records.reduce((n, r) => n + r.cpuMicros, 0)).toBe(cpuMicros);
    expect(records.reduce((n, r) => n + r.hostCalls, 0)).toBe(hostCalls);
    const byName = records.reduce((n, r) => n + Object.values(r.hostCallsByName).reduce((a, b) => a + b, 0), 0);
    expect(byName).toBe(hostCalls);
    expect(new Set(records.map((r) => r.tenant))).toEqual(new Set(["t0", "t1"]));
    expect(records.every((r) => r.bytesIn > 0 && r.memoryPeakBytes > 0 && r.outcome === "OK")).toBe(true);
  });

  it("a host call still in flight when the eval ends is counted by name in its record, as in the report", async () => {
    const records: UsageRecord[] = [];
    const sb = sandbox({ onUsage: (r) => records.push(r) });
    sb.defineAsyncFunction("never", () => new Promise(() => {}));
    const report = await sb.run("never(); 1");
    expect(report.stats.hostCalls).toBe(1);
    await nextTurn();
    expect(records[0]!.hostCallsByName).toEqual({ never: 1 });
  });

  it("a throwing onUsage does not disturb the eval", async () => {
    const sb = sandbox({
      onUsage: () => {
        throw new Error("billing down");
      },
    });
    expect(sb.evalSync("1 + 1")).toBe(2);
    await nextTurn();
    expect(sb.evalSync("2 + 2")).toBe(4);
  });

  it("onUsage must be a function", () => {
    expect(() => new Sandbox({ onUsage: 5 as never })).toThrow(/onUsage must be a function/);
  });
});
