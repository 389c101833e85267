// Async host calls whose arguments are all scalars (at most 16; strings of at most 256 units) skip
// the resumable decoder on the host. Every row runs the same call two ways in an off-thread eval:
// `scalar`, the call as written, and `codec`, with an extra object argument that sends it through
// the general decoder; both must give the host and the guest exactly the same values.
import { describe, expect, it } from "vitest";
import type { ConsoleEntry, HostCallContext } from "../../src/index.js";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test
import { decodeScalarArguments, decodeValue, encodeValue } from "../../src/marshal.js";
import { ARGUMENTS, RESULTS, THROWN } from "./primitive-rows.js";

const PATHS = ["scalar", "codec"] as const;
type Path = (typeof PATHS)[number];

/** `fn(args)` as `path` calls it. */
function callOf(path: Path, fn: string, args: string): string {
  return path === "codec" ? `${fn}(${args}, {})` : `${fn}(${args})`;
}

/** A promise and the functions that settle it. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("async host calls with scalar arguments agree with the codec path", () => {
  it.each(ARGUMENTS)("passes %s to the host and back unchanged", async (expr) => {
    const expected: unknown = new Function(`return ${expr}`)();
    const rows = [];
    for (const path of PATHS) {
      const sb = sandbox();
      const received: unknown[] = [];
      sb.defineAsyncFunction("echo", async (args) => {
        received.push(args);
        return args[0];
      });
      const back = await sb.eval(
        `const v = ${expr}; const r = await ${callOf(path, "echo", "v")}; [Object.is(r, v), r]`,
      );
      expect(received.length, path).toBe(1);
      expect(Object.is(received[0]![0], expected), `${path}: the host got ${expr}`).toBe(true);
      expect((back as unknown[])[0], `${path}: the guest got ${expr} back`).toBe(true);
      rows.push(back);
    }
    expect(rows[0]).toStrictEqual(rows[1]);
  });

  it.each([0, 1, 2, 3, 15, 16, 17, 40])("passes %i mixed scalar arguments in order", async (count) => {
    const kinds = [
      (i: number) => `${i}`,
      () => "-0",
      (i: number) => `${i} / 3`,
      (i: number) => `'s${i}'`,
      () => "null",
      () => "undefined",
      (i: number) => `${i % 4 === 0}`,
      (i: number) => `'\\u00e9${i}'`,
    ];
    const guestArgs = `[${Array.from({ length: count }, (_, i) => kinds[i % kinds.length]!(i)).join(", ")}]`;
    const rows = [];
    for (const path of PATHS) {
      const sb = sandbox();
      let received: unknown[] = [];
      sb.defineAsyncFunction("take", (got) => {
        received = path === "codec" ? got.slice(0, -1) : got;
        return got.length;
      });
      const call = path === "codec" ? `take(...${guestArgs}, {})` : `take(...${guestArgs})`;
      const back = await sb.eval(`await ${call}`);
      expect(back, path).toBe(count + (path === "codec" ? 1 : 0));
      rows.push(received);
    }
    expect(rows[0]).toHaveLength(count);
    expect(rows[0]).toStrictEqual(rows[1]);
    expect(Object.is(rows[0]![1], -0) || count < 2).toBe(true);
  });

  it.each(RESULTS.map((value, i) => [i, value] as const))(
    "returns host result #%i, plain or as a promise, as the codec does",
    async (i, value) => {
      const rows = [];
      for (const path of PATHS) {
        const sb = sandbox();
        sb.defineAsyncFunction("give", () => RESULTS[i]);
        sb.defineAsyncFunction("later", async () => RESULTS[i]);
        rows.push(
          await sb.eval(`const a = await ${callOf(path, "give", "1")}; const b = await ${callOf(path, "later", "1")};
          [typeof a, Object.is(a, -0), a, typeof b, Object.is(b, -0), b]`),
        );
      }
      expect((rows[0] as unknown[])[2]).toStrictEqual(value);
      expect(rows[0]).toStrictEqual(rows[1]);
    },
  );

  it.each(THROWN.map((thrown, i) => [i, thrown] as const))(
    "turns host throw or rejection #%i into the same guest exception",
    async (_i, thrown) => {
      const rows = [];
      for (const path of PATHS) {
        const sb = sandbox();
        sb.defineAsyncFunction("fail", () => {
          throw thrown();
        });
        sb.defineAsyncFunction("reject", () => Promise.reject(thrown()));
        const caught = (fn: string): string =>
          `await ${callOf(path, fn, "1")}.then(() => 'no throw', (e) => [typeof e, e instanceof Error, e.name, e.message])`;
        rows.push(await sb.eval(`[${caught("fail")}, ${caught("reject")}]`));
      }
      expect((rows[0] as unknown[][])[0]![1]).toBe(true);
      expect((rows[0] as unknown[])[0]).toStrictEqual((rows[0] as unknown[])[1]);
      expect(rows[0]).toStrictEqual(rows[1]);
    },
  );
});

describe("decodeScalarArguments", () => {
  it("decodes what the general decoder decodes, or leaves it to it", () => {
    const values: unknown[] = [...RESULTS, ...ARGUMENTS.map((expr) => new Function(`return ${expr}`)())];
    for (let n = 0; n <= 18; n++) {
      for (let start = 0; start < values.length; start += 7) {
        const array = Array.from({ length: n }, (_, i) => values[(start + i * 5) % values.length]);
        const bytes = encodeValue(array);
        const scalar = decodeScalarArguments(bytes, bytes.length);
        if (scalar) expect(scalar).toStrictEqual(decodeValue(bytes));
        else
          expect(
            n > 16 ||
              array.some(
                (v) =>
                  (v !== null && typeof v === "object") ||
                  typeof v === "bigint" ||
                  (typeof v === "string" && v.length > 256),
              ),
          ).toBe(true);
        // Cut short anywhere, the bytes go to the general decoder (which reports them malformed).
        for (let end = 0; end < bytes.length; end += 3) expect(decodeScalarArguments(bytes, end)).toBeUndefined();
      }
    }
  });
});

describe("async host calls with scalar arguments in flight", () => {
  it("reaches the host after a console line still being decoded in slices", async () => {
    const sb = sandbox();
    const order: string[] = [];
    sb.defineAsyncFunction("mark", (args) => {
      order.push(`call ${String(args[0])}`);
      return null;
    });
    // A console line of 30,000 keys takes several decode slices on the host; the call after it
    // must wait for it, though its own arguments need no decoder.
    const onConsole = (entry: ConsoleEntry): void => {
      order.push(`console ${entry.text.length > 0}`);
    };
    await sb.eval("const o = {}; for (let i = 0; i < 30000; i++) o['k' + i] = i; console.log(o); await mark(1)", {
      onConsole,
    });
    expect(order).toEqual(["console true", "call 1"]);
  });

  it("reaches the host after an earlier call whose arguments are still being decoded", async () => {
    const sb = sandbox();
    const order: unknown[] = [];
    sb.defineAsyncFunction("mark", (args) => {
      order.push(typeof args[0] === "object" ? Object.keys(args[0] as object).length : args[0]);
      return null;
    });
    await sb.eval(
      "const o = {}; for (let i = 0; i < 30000; i++) o['k' + i] = i; const first = mark(o); await mark(2); await first",
    );
    expect(order).toEqual([30000, 2]);
  });

  it("rejects with ABORTED when the eval is aborted mid-call, and fires the call's signal", async () => {
    const sb = sandbox();
    const signals: AbortSignal[] = [];
    const called = deferred<void>();
    sb.defineAsyncFunction("wait", (_args, { signal }: HostCallContext) => {
      signals.push(signal);
      called.resolve();
      return new Promise(() => {});
    });
    const controller = new AbortController();
    const aborted = sb.eval("await wait(2, 'y', null)", { signal: controller.signal });
    await called.promise;
    controller.abort();
    await expect(aborted).rejects.toMatchObject({ code: "ABORTED" });
    expect(signals.at(-1)!.aborted).toBe(true);
    expect(await sb.eval("1 + 1")).toBe(2);
  });

  it("rejects with DISPOSED when the sandbox is disposed mid-call; the late result is dropped", async () => {
    const sb = sandbox();
    const called = deferred<void>();
    const answer = deferred<number>();
    let signal: AbortSignal | undefined;
    sb.defineAsyncFunction("wait", (_args, context: HostCallContext) => {
      signal = context.signal;
      called.resolve();
      return answer.promise;
    });
    const pending = sb.eval("await wait(1)");
    await called.promise;
    sb.dispose();
    await expect(pending).rejects.toMatchObject({ code: "DISPOSED" });
    expect(signal!.aborted).toBe(true);
    answer.resolve(7);
    await new Promise((r) => setImmediate(r));
    expect(sb.disposed).toBe(true);
  });

  it("cuts off un-awaited calls at the end of the eval; their late results reach no later eval", async () => {
    const sb = sandbox();
    const answers: Array<(v: unknown) => void> = [];
    const signals: AbortSignal[] = [];
    sb.defineAsyncFunction("later", (_args, { signal }: HostCallContext) => {
      signals.push(signal);
      return new Promise((resolve) => answers.push(resolve));
    });
    sb.defineAsyncFunction("now", (args) => args[0]);
    await expect(
      sb.eval("globalThis.got = []; later(1).then((v) => got.push(v)); later(2).then((v) => got.push(v)); 'done'"),
    ).resolves.toBe("done");
    expect(answers).toHaveLength(2);
    // The next eval makes a call of its own while the cut-off ones are answered.
    const next = sb.eval("const r = await now(3); [r, got.length]");
    for (const answer of answers) answer("stale");
    expect(await next).toEqual([3, 0]);
    expect(await sb.eval("got.length")).toBe(0);
    expect(signals.every((s) => s.aborted)).toBe(true);
  });

  it("keeps budgets and stops across a run of calls answered while the guest waits in its slice", async () => {
    // Calls answered at once may be taken up without ending the executor's slice; the budget and
    // the stop still apply to the guest code between them.
    const sb = sandbox();
    sb.defineAsyncFunction("now", (args) => args[0]);
    const spent = await sb.eval("let s = 0; for (let i = 0; i < 2000; i++) s += await now(i); s");
    expect(spent).toBe((1999 * 2000) / 2);
    // 100 calls use a small part of the budget even in a sanitizer build; the spin uses the rest.
    const report = await sb.run("for (let i = 0; i < 100; i++) await now(i); while (true) {}", { timeoutMs: 300 });
    expect(report.ok ? "finished" : report.error.code).toBe("TIMEOUT");
    expect(report.stats.executionMs).toBeGreaterThanOrEqual(300);
    expect(report.stats.hostCalls).toBe(100);
    expect(await sb.eval("await now(5)")).toBe(5);
  });

  it("lets the event loop turn while a guest awaits host calls answered at once", async () => {
    // Answers that come back within microseconds are taken up in the same turn of the event loop,
    // but only for about 1 ms of each turn. 5,000 calls take far longer than 10 ms on any machine
    // (each is a thread hand-over both ways), so the loop turns more than 10 times; a turn that
    // kept going until Node's limit of 1,000 dispatches would give about 5.
    const sb = sandbox();
    sb.defineAsyncFunction("now", async (args) => args[0]);
    await sb.eval("await now(0)");
    let turns = 0;
    let running = true;
    const tick = (): void => {
      turns++;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    const sum = await sb.eval("let s = 0; for (let i = 0; i < 5000; i++) s += await now(i); s");
    running = false;
    expect(sum).toBe((4999 * 5000) / 2);
    expect(turns).toBeGreaterThan(10);
  });
});
