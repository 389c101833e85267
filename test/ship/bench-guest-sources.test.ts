// The bench's guest programs run as they are, and an adapter wraps the one whose value is a
// promise: `await (${source})` (bench/engines/quickjs-native.js; case (e), 10k awaited host calls,
// and the latency case's host loop). The formatter once put a semicolon after its last
// expression: the wrapped source stopped parsing, and case (e) printed "—" in every run.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";

const guestSource = (name: string): string =>
  readFileSync(new URL(`../../bench/workloads/guest/${name}`, import.meta.url), "utf8");

describe("a bench guest source an adapter awaits as a value", () => {
  it("runs wrapped as `await (source)`: the awaited host calls of case (e) sum up", async () => {
    const sb = new Sandbox();
    try {
      sb.defineAsyncFunction("host", async ([i]) => (i as number) + 1);
      expect(await sb.eval(`await (${guestSource("async-host-calls.js")})`)).toBe((10000 * 10001) / 2);
    } finally {
      sb.dispose();
    }
  });
});
