// Hazard: the host-function doorway used hostilely, from either side: guest arguments built to
// run code in the copier, host functions returning or throwing values that cannot cross, call
// floods, and host code disposing sandboxes in the middle of their evals. Every case must end in
// a catchable guest error or a typed SandboxError, with the host and other sandboxes unharmed.
import { describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";
import { bystander, codeOf, expectHostResponsive, expectMemoryBack, sandbox, cpuTimed } from "./harness.js";

/** Runs `expr` in the guest and returns what a try/catch around it saw. */
const CATCH = (expr: string): string =>
  `try { const v = ${expr}; ['value', typeof v] } catch (e) { ['thrown', e instanceof Error, typeof e.message] }`;

describe("hostile guest arguments never reach the host function", () => {
  const ARGS = {
    "an accessor": "({ get secret() { globalThis.ran = true; return 1; } })",
    "a Proxy": "new Proxy({}, { ownKeys() { globalThis.ran = true; return []; } })",
    "a function": "() => 1",
    "a symbol": "Symbol('s')",
    "a nested getter in an array":
      "[1, [2, Object.defineProperty({}, 'x', { get() { globalThis.ran = true; }, enumerable: true })]]",
  };

  it.each(Object.entries(ARGS))("refuses %s with a catchable TypeError, running nothing", (_name, arg) => {
    let calls = 0;
    const sb = sandbox();
    sb.defineFunction("sink", () => calls++);
    expect(
      sb.evalSync(`globalThis.ran = false; try { sink(${arg}); 'called' } catch (e) { [e.name, globalThis.ran] }`),
    ).toEqual(["TypeError", false]);
    expect(calls).toBe(0);
    expect(sb.evalSync("sink(1); 'ok'")).toBe("ok");
    expect(calls).toBe(1);
  });

  it("refuses an argument larger than the guest could ever have sent (100 MB) only by the guest's own limit", async () => {
    let calls = 0;
    const sb = sandbox({ memoryLimitBytes: 32 * 1024 * 1024 });
    sb.defineFunction("sink", () => calls++);
    expect(await codeOf(() => sb.eval("sink('x'.repeat(100 * 1024 * 1024))"))).toBe("OUT_OF_MEMORY");
    expect(calls).toBe(0);
    expect(await sb.eval("sink('fine'); 'ok'")).toBe("ok");
  });
});

describe("host results that cannot cross become guest errors", () => {
  const RESULTS: Record<string, () => unknown> = {
    "a function": () => () => 1,
    "a symbol": () => Symbol("s"),
    "a WeakMap": () => new WeakMap(),
    "an object whose getter throws": () => ({
      get x(): never {
        throw new Error("host getter");
      },
    }),
    "a promise from a sync function": () => Promise.resolve(1),
  };

  it.each(Object.entries(RESULTS))("%s: the guest catches an Error and carries on", async (_name, make) => {
    const sb = sandbox();
    sb.defineFunction("give", make);
    expect(sb.evalSync(CATCH("give()"))).toEqual(["thrown", true, "string"]);
    expect(await sb.eval(CATCH("give()"))).toEqual(["thrown", true, "string"]);
    expect(sb.evalSync("1 + 1")).toBe(2);
  });

  it.each(Object.entries(RESULTS))(
    "%s from an async function: the guest promise rejects with an Error",
    async (name, make) => {
      if (name === "a promise from a sync function") return; // a promise is the normal async result
      const sb = sandbox();
      sb.defineAsyncFunction("give", async () => make());
      expect(
        await sb.eval(`try { await give(); 'resolved' } catch (e) { [e instanceof Error, typeof e.message] }`),
      ).toEqual([true, "string"]);
    },
  );
});

describe("exotic host throws become plain guest Errors", () => {
  const THROWN: Record<string, unknown> = {
    "a symbol": Symbol("t"),
    null: null,
    undefined: undefined,
    "a Proxy whose traps throw": new Proxy(
      {},
      {
        get() {
          throw new Error("trap");
        },
        getPrototypeOf() {
          throw new Error("trap");
        },
      },
    ),
    "an object whose toString throws": {
      toString() {
        throw new Error("toString");
      },
    },
    "an Error with a 1 MB message": new Error("m".repeat(1 << 20)),
  };

  it.each(Object.entries(THROWN))("%s", async (_name, thrown) => {
    const sb = sandbox();
    sb.defineFunction("boom", () => {
      throw thrown;
    });
    sb.defineAsyncFunction("boomAsync", async () => {
      throw thrown;
    });
    expect(sb.evalSync("try { boom(); 'no throw' } catch (e) { [e instanceof Error, typeof e.message] }")).toEqual([
      true,
      "string",
    ]);
    expect(
      await sb.eval("try { await boomAsync(); 'no throw' } catch (e) { [e instanceof Error, typeof e.message] }"),
    ).toEqual([true, "string"]);
    await expectHostResponsive();
  });
});

describe("call floods", () => {
  // Each sync call from the executor waits for the main thread and back: 2-4 s on a quiet machine,
  // over 30 s under load. Wall budget and test timeout leave room for that.
  it("counts 100,000 sync host calls in one eval and stays responsive", async () => {
    const sb = sandbox({ executionTimeoutMs: 20_000, wallTimeoutMs: 600_000 });
    let calls = 0;
    sb.defineFunction("tick", () => ++calls);
    const report = await sb.run("let last = 0; for (let i = 0; i < 100000; i++) last = tick(); last");
    expect(report.ok && report.value).toBe(100000);
    expect(report.stats.hostCalls).toBe(100000);
    await expectHostResponsive();
  }, 180_000);

  // The time of a number-argument host call is read from the coarse wall clock and kept out of
  // the budget. Taken off the thread's CPU time, a host function that blocks (or a loaded machine)
  // credited the guest far more than the call's CPU: a guest calling one in a loop never ran out.
  it.each([
    [
      "blocks for 1 ms, between stretches of guest work",
      "while (true) { host(1); for (let i = 0; i < 20000; i++); }",
      1,
      20,
    ],
    ["blocks for 0.1 ms, called as often as the guest can", "while (true) host(1);", 0.1, 5],
  ])(
    "stops a guest that calls a host function that %s at its execution budget",
    (_what, code, blockMs, budgetMs) => {
      const pause = new Int32Array(new SharedArrayBuffer(4));
      let calls = 0;
      const sb = sandbox();
      sb.defineFunction("host", (n) => {
        // Far past what the budget allows: the guard keeps a regression from running for ever.
        if (++calls > 200_000) throw new Error("the guest outlived its budget");
        Atomics.wait(pause, 0, 0, blockMs);
        return n;
      });
      const report = sb.runSync(code, { timeoutMs: budgetMs });
      expect(report.ok).toBe(false);
      expect(!report.ok && report.error.code).toBe("TIMEOUT");
      expect(report.stats.executionMs).toBeGreaterThanOrEqual(budgetMs);
    },
    600_000,
  );

  it("gives memory back after 5,000 pending async calls are cut off by the wall budget", async () => {
    const other = bystander();
    // Long enough for a loaded machine to start the guest and issue calls before the budget ends.
    const sb = sandbox({ wallTimeoutMs: 3000 });
    const baseline = sb.memoryUsage().usedBytes;
    let started = 0;
    let aborted = 0;
    sb.defineAsyncFunction("never", (_args, { signal }) => {
      started++;
      return new Promise((resolve) =>
        signal.addEventListener("abort", () => {
          aborted++;
          resolve(0);
        }),
      );
    });
    const [code, ms] = await cpuTimed(() =>
      codeOf(() => sb.eval("await Promise.all(Array.from({ length: 5000 }, () => never()))")),
    );
    expect(code).toBe("TIMEOUT");
    expect(ms).toBeLessThan(10_000); // dispatching 5,000 calls to the host dominates, under ASan too
    await new Promise((r) => setTimeout(r, 10));
    // Every call the host received was told to stop (a slow guest may not have issued all 5,000).
    expect(started).toBeGreaterThan(0);
    expect(aborted).toBe(started);
    expectMemoryBack(sb, baseline, 2 * 1024 * 1024);
    await other.check();
  });
});

describe("host code disposing sandboxes mid-eval", () => {
  it("disposes a different sandbox whose eval is waiting: that eval rejects DISPOSED, the caller continues", async () => {
    const victim = sandbox();
    victim.defineAsyncFunction("wait", () => new Promise((r) => setTimeout(r, 5000)));
    const victimEval = codeOf(() => victim.eval("await wait()"));
    const caller = sandbox();
    caller.defineFunction("killOther", () => victim.dispose());
    expect(await caller.eval("killOther(); 'after'")).toBe("after");
    expect(await victimEval).toBe("DISPOSED");
    expect(victim.disposed).toBe(true);
  });

  it("disposes its own sandbox from a sync host function and drops it: evalSync answers DISPOSED, even after a full GC", async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    const other = bystander();
    let sb: Sandbox | undefined = new Sandbox();
    sb.defineFunction("selfDestruct", () => {
      sb?.dispose();
      sb = undefined; // nothing references the sandbox's handle now but the running eval
      gc?.();
      return 1;
    });
    const report = sb.runSync("selfDestruct(); 'after'");
    expect(!report.ok && report.error.code).toBe("DISPOSED");
    gc?.();
    await new Promise((r) => setImmediate(r)); // finalizers run
    await other.check();
  });

  it("ignores an async result that arrives after its sandbox was disposed", async () => {
    const sb = sandbox();
    let finish!: (v: unknown) => void;
    let called!: () => void;
    const calledOnce = new Promise<void>((r) => (called = r));
    sb.defineAsyncFunction(
      "slow",
      () =>
        new Promise((r) => {
          finish = r;
          called();
        }),
    );
    const pending = codeOf(() => sb.eval("await slow()"));
    await calledOnce;
    sb.dispose();
    expect(await pending).toBe("DISPOSED");
    finish({ big: "x".repeat(1 << 20) });
    await new Promise((r) => setTimeout(r, 20));
    await expectHostResponsive();
  });
});
