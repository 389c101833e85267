/**
 * Spans handed to the OpenTelemetry SDK after the eval (README, "Observability"): made with the
 * times recorded while the eval ran, under the same parents as spans made live.
 */
import { performance } from "node:perf_hooks";
import { trace } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";
import { parentOf, registerOtel, type OtelHarness } from "./support.js";

let otel: OtelHarness | undefined;
const sandboxes: Sandbox[] = [];
afterEach(async () => {
  for (const s of sandboxes.splice(0)) s.dispose();
  await otel?.close();
  otel = undefined;
});

function sandbox(): Sandbox {
  const sb = new Sandbox();
  sandboxes.push(sb);
  sb.defineFunction("plain", (x: unknown) => (x as number) + 1);
  sb.defineFunction("traced", () =>
    trace.getTracer("test").startActiveSpan("inner", (span) => {
      span.end();
      return 1;
    }),
  );
  sb.defineFunction("annotate", () => {
    trace.getActiveSpan()!.setAttribute("test.note", "set inside the call");
    return 2;
  });
  sb.defineAsyncFunction("later", async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return 3;
  });
  return sb;
}

/** Epoch milliseconds now, on the clock the SDK stamps spans with (not `performance.timeOrigin`'s, which drifts from it). */
const epochMs = (): number => Date.now();
const ms = (t: [number, number]): number => t[0] * 1e3 + t[1] / 1e6;
/** The SDK anchors each span's times to `Date.now()` when it makes the span: whole milliseconds. */
const SLACK_MS = 1;

/** Keeps the thread busy for `ms`: work done after the eval, before its spans are handed over. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

function within(span: ReadableSpan, from: number, to: number): void {
  expect(ms(span.startTime)).toBeGreaterThanOrEqual(from - SLACK_MS);
  expect(ms(span.endTime)).toBeLessThanOrEqual(to + SLACK_MS);
  expect(ms(span.endTime)).toBeGreaterThanOrEqual(ms(span.startTime));
}

function checkTree(name: string, from: number, to: number): void {
  const spans = otel!.spans();
  const evalSpan = spans.find((s) => s.name === name)!;
  within(evalSpan, from, to);
  const calls = spans.filter((s) => s.attributes["gen_ai.operation.name"] === "execute_tool");
  expect(calls.map((s) => s.attributes["gen_ai.tool.name"]).sort()).toEqual(
    name === "quickjs_native.eval" ? ["annotate", "later", "plain", "traced"] : ["annotate", "plain", "traced"],
  );
  for (const call of calls) {
    expect(parentOf(call)).toBe(evalSpan.spanContext().spanId);
    expect(call.spanContext().traceId).toBe(evalSpan.spanContext().traceId);
    // A call span made after the eval ended still starts and ends inside the eval.
    within(call, ms(evalSpan.startTime), ms(evalSpan.endTime));
  }
  const byName = (tool: string) => calls.find((s) => s.attributes["gen_ai.tool.name"] === tool)!;
  const inner = spans.find((s) => s.name === "inner")!;
  expect(parentOf(inner)).toBe(byName("traced").spanContext().spanId);
  within(inner, ms(byName("traced").startTime), ms(byName("traced").endTime));
  expect(byName("annotate").attributes["test.note"]).toBe("set inside the call");
  expect(byName("plain").attributes).toMatchObject({
    "gen_ai.tool.type": "function",
    "gen_ai.tool.call.id": expect.stringMatching(/^\d+\.\d+$/),
  });
}

describe("spans handed to the SDK after the eval", () => {
  it("evalSync's span and its host calls' spans keep the times they ran at and their parents", async () => {
    otel = registerOtel();
    const sb = sandbox();
    const from = epochMs();
    expect(sb.evalSync("plain(1) + traced() + annotate()")).toBe(5);
    const to = epochMs();
    busy(20); // the spans are made after this, and still carry the times the eval ran at
    await null;
    checkTree("quickjs_native.evalSync", from, to);
  });

  it("evalSync answers before its spans reach the SDK, and they are there after one await", async () => {
    otel = registerOtel();
    const sb = sandbox();
    expect(sb.evalSync("plain(1)")).toBe(2);
    expect(otel.spans()).toEqual([]); // nothing made or ended on the caller's time
    await null;
    expect(
      otel
        .spans()
        .map((s) => s.name)
        .sort(),
    ).toEqual(["execute_tool plain", "quickjs_native.evalSync"]);
  });

  it("an async eval's spans likewise, under the caller's active span", async () => {
    otel = registerOtel();
    const sb = sandbox();
    const from = epochMs();
    const value = await trace.getTracer("test").startActiveSpan("caller", async (span) => {
      const v = await sb.eval("plain(1) + traced() + annotate() + (await later())");
      span.end();
      return v;
    });
    const to = epochMs();
    expect(value).toBe(8);
    checkTree("quickjs_native.eval", from, to);
    const spans = otel.spans();
    expect(parentOf(spans.find((s) => s.name === "quickjs_native.eval")!)).toBe(
      spans.find((s) => s.name === "caller")!.spanContext().spanId,
    );
  });

  it("an eval making more host calls than one batch holds hands every span over, each under the eval", async () => {
    otel = registerOtel();
    const sb = sandbox();
    expect(sb.evalSync("let s = 0; for (let i = 0; i < 3000; i++) s += plain(i); s")).toBe(4_501_500);
    await null;
    const spans = otel.spans();
    const evalSpan = spans.find((s) => s.name === "quickjs_native.evalSync")!;
    const calls = spans.filter((s) => s.name === "execute_tool plain");
    expect(calls).toHaveLength(3000);
    expect(new Set(calls.map(parentOf))).toEqual(new Set([evalSpan.spanContext().spanId]));
    expect(new Set(calls.map((s) => s.attributes["gen_ai.tool.call.id"])).size).toBe(3000);
  });
});
