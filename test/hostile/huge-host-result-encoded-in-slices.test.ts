// Hazard: an async host function (a PTC tool) whose result is megabytes: a file's text, a long
// list of rows. The result was encoded for the sandbox in one go when it settled, on the Node main
// thread that serves every session (tens of ms for tens of MB). It is now encoded a slice per turn
// of the event loop. The outcomes asserted: the encoder's writes of one such result span several
// turns of the event loop, no single write takes more than a small part of a long string, and the
// guest gets exactly the value, long strings inside Maps, Sets, Errors and RegExps in order.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Sandbox } from "../../src/index.js";
import { type NativeModule, native } from "../../src/native.js";
import { sandbox } from "./harness.js";

afterEach(() => {
  vi.restoreAllMocks();
});

/** Turns of the event loop, counted by a setImmediate chain, while `work` runs. */
async function countingTurns<T>(work: (turn: () => number) => Promise<T>): Promise<T> {
  let turns = 0;
  let running = true;
  const tick = (): void => {
    turns++;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return await work(() => turns);
  } finally {
    running = false;
  }
}

/** Records [length, turn] of each Buffer#write of a string that `mine` recognises. */
function recordWrites(turn: () => number, mine: (text: string) => boolean): Array<[number, number]> {
  const writes: Array<[number, number]> = [];
  const write = Buffer.prototype.write;
  vi.spyOn(Buffer.prototype, "write").mockImplementation(function (this: Buffer, ...args: unknown[]) {
    const text = args[0];
    if (typeof text === "string" && mine(text)) writes.push([text.length, turn()]);
    return (write as (...a: unknown[]) => number).apply(this, args);
  });
  return writes;
}

/** A sandbox whose native handle reports each method call (name, arguments) to `record` first. */
function withHandlesRecording(record: (method: string | symbol, args: unknown[]) => void): Sandbox {
  const holder = native as { SandboxHandle: NativeModule["SandboxHandle"] };
  const Real = holder.SandboxHandle;
  // A class (a constructor) whose instances are the real handle behind a recording Proxy.
  class Recording {
    constructor(...args: ConstructorParameters<NativeModule["SandboxHandle"]>) {
      // biome-ignore lint/correctness/noConstructorReturn: the handle the sandbox gets is the Proxy
      return new Proxy(new Real(...args), {
        get(target, key) {
          const value: unknown = Reflect.get(target, key, target);
          if (typeof value !== "function") return value;
          return (...callArgs: unknown[]) => {
            record(key, callArgs);
            return (value as (...a: unknown[]) => unknown).apply(target, callArgs);
          };
        },
      });
    }
  }
  holder.SandboxHandle = Recording as unknown as NativeModule["SandboxHandle"];
  try {
    return sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
  } finally {
    holder.SandboxHandle = Real;
  }
}

describe("an async host function's result of megabytes", () => {
  for (const [kind, text] of [
    ["Latin-1 text", `<${"x".repeat(63_999)}`.repeat(40)],
    [
      "UTF-16 text with pairs and lone surrogates across piece edges",
      `\u{1F600}\uD800é${"y".repeat(65_532)}`.repeat(40),
    ],
  ] as const) {
    it(`is encoded a slice per turn of the event loop (${kind}), and the guest gets it exactly`, async () => {
      expect(text.length).toBeGreaterThan(2_500_000);
      const sb = sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
      sb.defineAsyncFunction("readFile", async () => text);
      const report = await countingTurns(async (turn) => {
        const writes = recordWrites(turn, (s) => s.length > 1000);
        const outcome = await sb.run("await readFile()");
        vi.restoreAllMocks();
        expect(writes.length).toBeGreaterThan(1);
        expect(Math.max(...writes.map(([length]) => length))).toBeLessThan(text.length / 8);
        expect(new Set(writes.map(([, at]) => at)).size).toBeGreaterThan(1);
        return outcome;
      });
      expect(report.ok).toBe(true);
      expect((report as { value: unknown }).value === text).toBe(true);
    });
  }

  it("of 100,000 rows is encoded a slice per turn of the event loop, and the guest gets every row", async () => {
    const rows = Array.from({ length: 100_000 }, (_, i) => ({ id: i, name: `row-${i}` }));
    const sb = sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
    sb.defineAsyncFunction("listRows", async () => rows);
    const report = await countingTurns(async (turn) => {
      const writes = recordWrites(turn, (s) => s.startsWith("row-"));
      const outcome = await sb.run(
        "const got = await listRows(); [got.length, got.every((r, i) => r.id === i && r.name === 'row-' + i)]",
      );
      vi.restoreAllMocks();
      expect(writes).toHaveLength(rows.length);
      expect(new Set(writes.map(([, at]) => at)).size).toBeGreaterThan(1);
      return outcome;
    });
    expect(report.ok && report.value).toEqual([100_000, true]);
  });

  it("reaches the addon a piece per turn of the event loop, never copied there all at once by one settle", async () => {
    const text = "<".padEnd(6_000_000, "x");
    const handed: Array<[number, number]> = []; // [bytes copied by one call into the addon, turn]
    const report = await countingTurns(async (turn) => {
      // The sandbox is created inside: its handle records what settle and appendResult copy.
      const sb = withHandlesRecording((method, args) => {
        const bytes = method === "settle" || method === "appendResult" ? args[0] : undefined;
        if (bytes instanceof Uint8Array) handed.push([bytes.length, turn()]);
      });
      sb.defineAsyncFunction("readFile", async () => text);
      return sb.run("(await readFile()).length");
    });
    expect(report.ok && report.value).toBe(6_000_000);
    const big = handed.filter(([bytes]) => bytes > 1000);
    expect(big.length).toBeGreaterThan(1);
    expect(Math.max(...big.map(([bytes]) => bytes))).toBeLessThan(text.length / 4);
    expect(new Set(big.map(([, at]) => at)).size).toBe(big.length);
  });

  it("counts a Map's entries as written when host code adds one between two slices", async () => {
    const long = "x".repeat(3_000_000);
    const map = new Map([
      ["a", long],
      ["b", "short"],
    ]);
    const sb = sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
    sb.defineAsyncFunction("grown", async () => {
      setImmediate(() => map.set("c", "added later")); // runs before the encoding's second slice
      return map;
    });
    const value = await sb.eval(
      "const m = await grown(); [m.size, [...m.keys()].join(), m.get('a').length, m.get('c')]",
    );
    expect(value).toEqual([3, "a,b,c", 3_000_000, "added later"]);
  });

  it("keeps long strings inside Maps, Sets, Errors and RegExps in their places", async () => {
    const long = (c: string): string => c.repeat(70_000);
    const sb = sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
    sb.defineAsyncFunction("mixed", async () => ({
      m: new Map<unknown, unknown>([
        [{ a: long("a") }, long("b")],
        ["k", new Set([1, long("c"), 2])],
      ]),
      e: new RangeError(long("d")),
      r: new RegExp(long("e"), "gi"),
      big: 2n ** 300_000n,
      after: "end",
    }));
    const value = await sb.eval(`
      const { m, e, r, big, after } = await mixed();
      const [[key, first], [k, set]] = [...m];
      [key.a.length, key.a[0], first.length, first[0], k, [...set].map((x) => typeof x === "string" ? x.length + x[0] : x),
       e instanceof RangeError, e.message.length, e.message[0], r.source.length, r.flags, big.toString(16).length, after]
    `);
    expect(value).toEqual([
      70_000,
      "a",
      70_000,
      "b",
      "k",
      [1, "70000c", 2],
      true,
      70_000,
      "d",
      70_000,
      "gi",
      75_001,
      "end",
    ]);
  });
});
