import { describe, expect, it } from "vitest";
import { Sandbox, WallHold, type SandboxError, type HostCallContext } from "../../src/index.js";
import { sandbox, rejected } from "../hostile/harness.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** An async host function that resolves `value` after `ms`, honouring its abort signal. */
function delayed(sb: Sandbox, name: string, log?: Array<{ args: unknown[]; signal: AbortSignal }>): void {
  sb.defineAsyncFunction(name, ([value, ms], { signal }: HostCallContext) => {
    log?.push({ args: [value, ms], signal });
    return new Promise((resolve) => setTimeout(() => resolve(value), Number(ms)));
  });
}

describe("top-level await", () => {
  it("returns the completion value of the last statement", async () => {
    const sb = sandbox();
    expect(await sb.eval("const x = await Promise.resolve(20); x * 2 + 2")).toBe(42);
    expect(await sb.eval("await null; 'last'")).toBe("last");
    expect(await sb.eval("1 + 1")).toBe(2);
  });

  it("awaits an async host function and gets its copied result", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("lookup", async ([key]) => ({ key, found: true, at: new Date(0) }));
    expect(await sb.eval("const r = await lookup('k'); [r.key, r.found, r.at.getTime()]")).toEqual(["k", true, 0]);
  });

  it("gives the guest a promise at once from an async host function", async () => {
    const sb = sandbox();
    delayed(sb, "later");
    expect(await sb.eval("const p = later(1, 20); const kind = p instanceof Promise; [kind, await p]")).toEqual([
      true,
      1,
    ]);
  });

  it("rejects the guest promise with the host error's message only", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("broken", async () => {
      throw new TypeError("tool failed");
    });
    expect(await sb.eval("try { await broken(); 'no' } catch (e) { [e instanceof Error, e.message] }")).toEqual([
      true,
      "tool failed",
    ]);
  });

  it("rejects the guest promise with a readable message when the host rejects with a non-Error", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("odd", async () => {
      throw { code: 7 };
    });
    const seen = (await sb.eval("try { await odd(); 'no' } catch (e) { [e instanceof Error, e.message] }")) as [
      boolean,
      string,
    ];
    expect(seen[0]).toBe(true);
    expect(seen[1]).toContain("7");
  });

  it("rejects the guest promise when the host result cannot be copied", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("giveFn", async () => () => 1);
    const seen = (await sb.eval("try { await giveFn(); 'no' } catch (e) { [e instanceof Error, e.message] }")) as [
      boolean,
      string,
    ];
    expect(seen[0]).toBe(true);
    expect(seen[1]).toMatch(/function/);
  });

  it("reports an unhandled rejection of the script as GUEST_ERROR", async () => {
    const sb = sandbox();
    const err = await rejected(sb.eval("await Promise.reject(new RangeError('nope'))"));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest).toMatchObject({ name: "RangeError", message: "nope" });
  });

  it("sums 10,000 sequentially awaited host calls correctly", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("host", async ([i]) => Number(i) * 2);
    const report = await sb.run("let s = 0; for (let i = 0; i < 10000; i++) s += await host(i); s");
    expect(report.ok && report.value).toBe(2 * ((9999 * 10000) / 2));
    expect(report.stats.hostCalls).toBe(10000);
  });

  it("counts sync host calls made during an async eval", async () => {
    const sb = sandbox();
    sb.defineFunction("inc", (x) => Number(x) + 1);
    const report = await sb.run("let v = 0; for (let i = 0; i < 100; i++) v = inc(v); await null; v");
    expect(report.ok && report.value).toBe(100);
    expect(report.stats.hostCalls).toBe(100);
  });
});

describe("a promise as the completion value is awaited", () => {
  it("answers the value of a fulfilled promise: Promise.resolve(7) gives 7", async () => {
    const sb = sandbox();
    expect(await sb.eval("Promise.resolve(7)")).toBe(7);
    expect(await sb.eval("await null; Promise.resolve(8)")).toBe(8);
    expect(sb.evalSync("Promise.resolve().then(() => 9)")).toBe(9);
  });

  it("turns a rejected async IIFE into the eval's GUEST_ERROR", async () => {
    const sb = sandbox();
    const err = await rejected(sb.eval("(async () => { throw new Error('boom') })()"));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest).toMatchObject({ name: "Error", message: "boom" });
    expect(() => sb.evalSync("(async () => { throw new Error('boom') })()")).toThrow(/boom/);
  });

  it("runs a floating async IIFE past its host awaits to completion", async () => {
    const sb = sandbox();
    const log: Array<{ args: unknown[]; signal: AbortSignal }> = [];
    delayed(sb, "mark", log);
    const report = await sb.run(
      "(async () => { await mark(1, 20); globalThis.done = true; return (await mark(2, 5)) + 1 })()",
    );
    expect(report.ok && report.value).toBe(3);
    expect(report.stats.hostCalls).toBe(2);
    expect(sb.evalSync("globalThis.done")).toBe(true);
    expect(log.map((c) => c.args[0])).toEqual([1, 2]);
  });

  it("stops a completion promise's chain with the execution budget", async () => {
    const sb = sandbox();
    const err = await rejected(sb.eval("(async () => { for (;;) await null; })()", { timeoutMs: 100 }));
    expect(err.code).toBe("TIMEOUT");
    expect(err.budget).toBe("execution");
  });

  it("stops a completion promise waiting on a slow host call with the wall budget", async () => {
    const sb = sandbox();
    delayed(sb, "slow");
    const err = await rejected(sb.eval("(async () => { await slow(1, 5000); })()", { wallTimeoutMs: 100 }));
    expect(err.code).toBe("TIMEOUT");
    expect(err.budget).toBe("wall");
  });

  it("gives back a promise nothing can settle as a promise", async () => {
    const sb = sandbox();
    const report = await sb.run("new Promise(() => {})", { unserializable: "describe" });
    expect(report.ok && String(report.value)).toBe("Promise {}");
    expect(sb.runSync("new Promise(() => {})", { unserializable: "describe" }).ok).toBe(true);
    expect((await rejected(sb.eval("new Promise(() => {})"))).code).toBe("UNSERIALIZABLE");
  });

  it("never runs a `then` getter of the completion value, and keeps a thenable as a value", async () => {
    const sb = sandbox();
    const value = await sb.eval(
      "globalThis.thenRead = 0; const p = Promise.resolve(4); Object.defineProperty(p, 'then', { get() { thenRead++; return Promise.prototype.then; } }); p",
    );
    expect(value).toBe(4);
    expect(sb.evalSync("thenRead")).toBe(0);
    expect(await sb.eval("({ kind: 'thenable', then: 1 })")).toEqual({ kind: "thenable", then: 1 });
  });
});

describe("two budgets: execution and wall", () => {
  it("does not count a 3 s host wait against executionTimeoutMs 100", async () => {
    const sb = sandbox({ executionTimeoutMs: 100 });
    delayed(sb, "slowHost");
    const report = await sb.run("await slowHost('done', 3000)");
    expect(report.ok && report.value).toBe("done");
    expect(report.stats.executionMs).toBeLessThan(100);
    expect(report.stats.wallMs).toBeGreaterThanOrEqual(2900);
  });

  it("fails a 20 s host wait with a wall TIMEOUT under wallTimeoutMs 1000, long before the host answers", async () => {
    const sb = sandbox({ executionTimeoutMs: 100 });
    delayed(sb, "slowHost");
    const started = performance.now();
    const err = await rejected(sb.eval("await slowHost('done', 20000)", { wallTimeoutMs: 1000 }));
    const elapsed = performance.now() - started;
    expect(err.code).toBe("TIMEOUT");
    expect(err.budget).toBe("wall");
    expect(elapsed).toBeGreaterThanOrEqual(950);
    // Far from both budgets: a loaded machine may fire the wall timer late, never 9 s late.
    expect(elapsed).toBeLessThan(10_000);
  });

  it("applies the sandbox's wallTimeoutMs when the eval sets none", async () => {
    const sb = sandbox({ wallTimeoutMs: 300 });
    delayed(sb, "slowHost");
    const err = await rejected(sb.eval("await slowHost(1, 2000)"));
    expect(err.budget).toBe("wall");
  });

  it("does not count the time a WallHold is held: a 1.5 s host wait under wallTimeoutMs 500 ends ok, and the budget runs again on release", async () => {
    const sb = sandbox({ executionTimeoutMs: 500, wallTimeoutMs: 500 });
    const hold = new WallHold();
    sb.defineAsyncFunction("waitForHuman", async () => {
      hold.hold();
      await sleep(1500);
      hold.release();
      return "decided";
    });
    delayed(sb, "slowHost");
    expect(await sb.eval("await waitForHuman()", { wallHold: hold })).toBe("decided");
    // Released, the budget runs again: what is left of it still stops a long wait.
    const err = await rejected(sb.eval("await waitForHuman(); await slowHost(1, 20000)", { wallHold: hold }));
    expect(err.budget).toBe("wall");
    await expect(sb.eval("1", { wallHold: {} as WallHold })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });

  it("counts only guest execution across awaits", async () => {
    const sb = sandbox({ executionTimeoutMs: 300, wallTimeoutMs: 20_000, clock: "real" });
    delayed(sb, "pause");
    // No slice alone spins past 100 ms, so only the sum of slices can reach the budget. The budget
    // is CPU time, which a loaded machine hands out slower than wall time: loop until it runs out.
    const err = await rejected(
      sb.eval("for (;;) { const end = Date.now() + 100; while (Date.now() < end) {} await pause(0, 10); }"),
    );
    expect(err.code).toBe("TIMEOUT");
    expect(err.budget).toBe("execution");
  });

  it("runs Promise.all over 50 host calls of 100 ms in parallel", async () => {
    const sb = sandbox();
    let inFlight = 0;
    let maxInFlight = 0;
    sb.defineAsyncFunction("slowHost", async ([i]) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await sleep(100);
      inFlight--;
      return Number(i) * 10;
    });
    const value = await sb.eval("await Promise.all([...Array(50)].map((_, i) => slowHost(i)))");
    expect(value).toEqual(Array.from({ length: 50 }, (_, i) => i * 10));
    // All 50 waits overlapped (serialised, at most one would be in flight), whatever the clock says.
    expect(maxInFlight).toBe(50);
  });

  it("keeps running guest code while host calls are pending", async () => {
    const sb = sandbox();
    delayed(sb, "slowHost");
    const value = await sb.eval(
      "const p = slowHost('host', 100); let n = 0; for (let i = 0; i < 1e5; i++) n += i; [n, await p]",
    );
    expect(value).toEqual([4999950000, "host"]);
  });
});

describe("abort", () => {
  it("rejects with ABORTED promptly and interrupts spinning guest code", async () => {
    const sb = sandbox({ executionTimeoutMs: 30_000 });
    const controller = new AbortController();
    const pending = sb.eval("while (true) {}", { signal: controller.signal });
    await sleep(100);
    const abortedAt = performance.now();
    controller.abort();
    const err = await rejected(pending);
    expect(err.code).toBe("ABORTED");
    // An abort that did not interrupt the guest would spin out the 30 s budget; the bound leaves a
    // loaded machine time to schedule the executor thread.
    expect(performance.now() - abortedAt).toBeLessThan(5000);
    expect(await sb.eval("1+1")).toBe(2);
  });

  it("rejects with ABORTED promptly while waiting on a host call, and fires that call's signal", async () => {
    const sb = sandbox();
    const calls: Array<{ args: unknown[]; signal: AbortSignal }> = [];
    delayed(sb, "slowHost", calls);
    const controller = new AbortController();
    const pending = sb.eval("await Promise.all([slowHost(1, 20000), slowHost(2, 20000)])", {
      signal: controller.signal,
    });
    while (calls.length < 2) await sleep(5);
    const fired = calls.map(
      (c) => new Promise<boolean>((resolve) => c.signal.addEventListener("abort", () => resolve(true), { once: true })),
    );
    const abortedAt = performance.now();
    controller.abort();
    const err = await rejected(pending);
    expect(err.code).toBe("ABORTED");
    // Without the abort the eval waits 20 s for its host calls.
    expect(performance.now() - abortedAt).toBeLessThan(5000);
    expect(await Promise.all(fired)).toEqual([true, true]);
    expect(calls.every((c) => c.signal.aborted)).toBe(true);
  });

  it("rejects at once when the signal is already aborted, running nothing", async () => {
    const sb = sandbox();
    sb.evalSync("globalThis.ran = false");
    const err = await rejected(sb.eval("ran = true", { signal: AbortSignal.abort() }));
    expect(err.code).toBe("ABORTED");
    expect(sb.evalSync("ran")).toBe(false);
  });

  it("fires pending host calls' signals when the eval times out", async () => {
    const sb = sandbox();
    const calls: Array<{ args: unknown[]; signal: AbortSignal }> = [];
    delayed(sb, "slowHost", calls);
    const err = await rejected(sb.eval("await slowHost(1, 5000)", { wallTimeoutMs: 200 }));
    expect(err.code).toBe("TIMEOUT");
    expect(calls[0]!.signal.aborted).toBe(true);
  });
});

describe("nothing leaks forward after a timeout or abort", () => {
  it("never delivers a late host result of a timed-out eval into a later eval", async () => {
    const sb = sandbox();
    delayed(sb, "echoLater");
    await rejected(
      sb.eval("globalThis.got = []; echoLater('STALE', 200).then((v) => got.push(v)); while (true) {}", {
        timeoutMs: 100,
      }),
    );
    // The stale result arrives (~200 ms) while this eval waits for its own call (~400 ms).
    const value = await sb.eval("const mine = await echoLater('FRESH', 400); [mine, got]");
    expect(value).toEqual(["FRESH", []]);
    await sleep(100);
    expect(await sb.eval("await null; got")).toEqual([]);
  });

  it("never delivers a late host result of an aborted eval into a later eval", async () => {
    const sb = sandbox();
    const calls: Array<{ args: unknown[]; signal: AbortSignal }> = [];
    delayed(sb, "echoLater", calls);
    const controller = new AbortController();
    const first = sb.eval("globalThis.got2 = []; got2.push(await echoLater('STALE', 200))", {
      signal: controller.signal,
    });
    // Aborted once the call reached the host (a fixed 50 ms could abort before the guest ran).
    while (calls.length < 1) await sleep(5);
    controller.abort();
    expect((await rejected(first)).code).toBe("ABORTED");
    const value = await sb.eval("const mine = await echoLater('FRESH', 400); [mine, got2]");
    expect(value).toEqual(["FRESH", []]);
  });

  it("never delivers a late host result into a later sync eval", async () => {
    const sb = sandbox();
    // The eval is ended once its call reached the host (a 50 ms wall budget could end it before
    // the guest ran on a loaded machine), and the result is delivered after that.
    let answer!: (v: unknown) => void;
    let called!: () => void;
    const calledOnce = new Promise<void>((r) => (called = r));
    sb.defineAsyncFunction(
      "echoLater",
      () =>
        new Promise((r) => {
          answer = r;
          called();
        }),
    );
    const controller = new AbortController();
    const first = sb.eval("globalThis.got3 = []; echoLater().then((v) => got3.push(v)); await new Promise(() => {})", {
      signal: controller.signal,
    });
    await calledOnce;
    controller.abort();
    expect((await rejected(first)).code).toBe("ABORTED");
    answer("STALE");
    await sleep(20);
    expect(sb.evalSync("Promise.resolve().then(() => {}); got3")).toEqual([]);
  });

  it("never runs leftover jobs of a timed-out eval later", async () => {
    const sb = sandbox();
    await rejected(
      sb.eval(
        "globalThis.leftoverRuns = 0; Promise.resolve().then(() => { leftoverRuns++; }); (async () => { await null; leftoverRuns++; })(); while (true) {}",
        { timeoutMs: 100 },
      ),
    );
    expect(await sb.eval("await null; await null; leftoverRuns")).toBe(0);
    expect(sb.evalSync("leftoverRuns")).toBe(0);
  });

  it("never resumes an interrupted async function later", async () => {
    const sb = sandbox();
    delayed(sb, "pause");
    await rejected(sb.eval("globalThis.resumed = false; await pause(0, 50); while (true) {}", { timeoutMs: 100 }));
    await sleep(100);
    expect(await sb.eval("await pause(0, 100); resumed")).toBe(false);
  });

  it("stops a job flood with the eval's budget and leaves no flood behind", async () => {
    const sb = sandbox();
    const report = await sb.run("globalThis.floods = 0; (function f() { floods++; Promise.resolve().then(f); })()", {
      timeoutMs: 200,
    });
    expect(report.ok || report.error.code).toBe("TIMEOUT");
    // The budget is the guest's CPU time: a loaded machine stretches the wall time, not this.
    expect(report.stats.executionMs).toBeLessThan(1000);
    const before = sb.evalSync("floods") as number;
    expect(await sb.eval("await null; 1+1", { timeoutMs: 1000 })).toBe(2);
    expect(sb.evalSync("floods")).toBe(before);
  });

  it("stops a job flood in evalSync too", () => {
    const sb = sandbox();
    let code: string | undefined;
    try {
      sb.evalSync("(function f() { Promise.resolve().then(f); })()", { timeoutMs: 200 });
    } catch (err) {
      code = (err as SandboxError).code;
    }
    expect(code).toBe("TIMEOUT");
    expect(sb.evalSync("1+1")).toBe(2);
  });
});

describe("queueing and concurrency", () => {
  it("runs evals on one sandbox one after another, in call order", async () => {
    const sb = sandbox();
    const order: number[] = [];
    sb.defineFunction("record", (i) => {
      order.push(Number(i));
    });
    delayed(sb, "pause");
    // Earlier evals wait longer: if they overlapped, later ones would finish first.
    const results = await Promise.all(
      [0, 1, 2, 3, 4].map((i) => sb.eval(`await pause(0, ${60 - i * 12}); record(${i}); ${i}`)),
    );
    expect(results).toEqual([0, 1, 2, 3, 4]);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it("does not let evalSync jump ahead of an eval called before it", async () => {
    const sb = sandbox();
    delayed(sb, "pause");
    // The host call keeps the eval in flight (its answer needs a turn of the event loop).
    const first = sb.eval("await pause(0, 1); globalThis.order = (globalThis.order ?? '') + 'async;'; 1");
    // evalSync cannot wait for the queued eval, so the only in-order answer is to refuse.
    let second: unknown;
    try {
      second = sb.evalSync("globalThis.order = (globalThis.order ?? '') + 'sync;'; 2");
    } catch (err) {
      second = (err as SandboxError).code;
    }
    expect(await first).toBe(1);
    expect(second).toBe("BUSY");
    expect(sb.evalSync("order")).toBe("async;");
  });

  it("keeps a failed eval from blocking the queue", async () => {
    const sb = sandbox();
    const settled = await Promise.allSettled([
      sb.eval("throw new Error('first')"),
      sb.eval("while (true) {}", { timeoutMs: 50 }),
      sb.eval("'third'"),
    ]);
    expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected", "fulfilled"]);
    expect((settled[2] as PromiseFulfilledResult<unknown>).value).toBe("third");
  });

  it("runs 100 sandboxes concurrently with correct results", async () => {
    const boxes = Array.from({ length: 100 }, (_, k) => {
      const sb = sandbox();
      sb.setGlobal("k", k);
      sb.defineAsyncFunction("offset", async ([x]) => {
        await sleep(5);
        return Number(x) * 1000;
      });
      return sb;
    });
    const values = await Promise.all(
      boxes.map((sb) => sb.eval("let s = 0; for (let i = 0; i < 20000; i++) s += i % (k + 1); s + await offset(k)")),
    );
    const expected = Array.from({ length: 100 }, (_, k) => {
      let s = 0;
      for (let i = 0; i < 20000; i++) s += i % (k + 1);
      return s + k * 1000;
    });
    expect(values).toEqual(expected);
  });

  it("holds no executor thread for sandboxes waiting on host calls", async () => {
    // More waiting evals than the executor's default thread cap (64), each held until the probe
    // has settled: had they kept their threads, the probe would queue behind them for ever.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    const waiting = Array.from({ length: 100 }, () => {
      const sb = sandbox();
      sb.defineAsyncFunction("slowHost", async () => {
        started++;
        await released;
        return "waited";
      });
      return sb.eval("await slowHost()");
    });
    while (started < waiting.length) await sleep(10);
    expect(await sandbox().eval("let s = 0; for (let i = 0; i < 1e5; i++) s += i; s")).toBe(4999950000);
    release();
    expect(new Set(await Promise.all(waiting))).toEqual(new Set(["waited"]));
  });

  it("settles 10,000 concurrent host calls of one eval correctly", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("id", async ([x]) => x);
    expect(
      await sb.eval(
        "const all = await Promise.all(Array.from({ length: 10000 }, (_, i) => id(i))); all.reduce((a, b) => a + b, 0)",
      ),
    ).toBe((9999 * 10000) / 2);
  });

  it("runs evals of different sandboxes in parallel on the executor", async () => {
    // Each guest spins until both have started: run one after the other, the first would spin
    // until its budget ran out.
    const arrived = new Set<string>();
    const spin = "arrive(); while (arrive() < 2) {} 'met'";
    const evals = ["a", "b"].map((name) => {
      const sb = sandbox({ executionTimeoutMs: 20_000, wallTimeoutMs: 20_000 });
      sb.defineFunction("arrive", () => arrived.add(name).size);
      return sb.eval(spin);
    });
    expect(await Promise.all(evals)).toEqual(["met", "met"]);
  });
});

describe("deep recursion on the executor thread", () => {
  it("gives STACK_OVERFLOW for uncaught recursion, never a crash", async () => {
    const err = await rejected(sandbox().eval("function f() { return f() + 1; } await null; f()"));
    expect(err.code).toBe("STACK_OVERFLOW");
  });

  it("gives a catchable RangeError inside the guest", async () => {
    expect(
      await sandbox().eval(
        "await null; function f() { return f() + 1; } let r; try { f(); } catch (e) { r = e instanceof RangeError; } r",
      ),
    ).toBe(true);
  });

  it("gives STACK_OVERFLOW for recursion resumed after a host call", async () => {
    const sb = sandbox();
    delayed(sb, "pause");
    const err = await rejected(
      sb.eval(
        "async function dive(n) { if (n === 0) await pause(0, 1); return 1 + (await dive(n - 1)); } await dive(1e6)",
      ),
    );
    expect(["STACK_OVERFLOW", "OUT_OF_MEMORY"]).toContain(err.code);
    expect(await sb.eval("1+1")).toBe(2);
  });
});

describe("dispose at any time", () => {
  it("rejects a running eval with DISPOSED, 100 times in a row", async () => {
    const codes: string[] = [];
    for (let i = 0; i < 100; i++) {
      const sb = new Sandbox();
      const pending = sb.eval("while (true) {}").then(
        () => "resolved",
        (err: SandboxError) => err.code,
      );
      if (i % 2 === 1) await new Promise((r) => setImmediate(r)); // half of them once running
      sb.dispose();
      codes.push(await pending);
    }
    expect(new Set(codes)).toEqual(new Set(["DISPOSED"]));
  });

  it("rejects an eval waiting on host calls with DISPOSED and fires their signals", async () => {
    const sb = new Sandbox();
    const calls: Array<{ args: unknown[]; signal: AbortSignal }> = [];
    delayed(sb, "slowHost", calls);
    const pending = sb.eval("await Promise.all([slowHost(1, 300), slowHost(2, 300)])");
    while (calls.length < 2) await sleep(5);
    sb.dispose();
    expect((await rejected(pending)).code).toBe("DISPOSED");
    expect(calls.every((c) => c.signal.aborted)).toBe(true);
    await sleep(400); // the host results arrive after dispose: nothing may crash
    expect(sb.disposed).toBe(true);
  });

  it("rejects queued evals with DISPOSED", async () => {
    const sb = new Sandbox();
    const running = sb.eval("while (true) {}");
    const queued = [sb.eval("1"), sb.eval("2")];
    await sleep(20);
    sb.dispose();
    const codes = await Promise.all([running, ...queued].map((p) => rejected(p).then((e) => e.code)));
    expect(codes).toEqual(["DISPOSED", "DISPOSED", "DISPOSED"]);
  });

  it("is safe to dispose twice, and through Symbol.dispose", async () => {
    const sb = new Sandbox();
    const pending = sb.eval("while (true) {}");
    sb.dispose();
    sb.dispose();
    sb[Symbol.dispose]();
    expect(sb.disposed).toBe(true);
    expect((await rejected(pending)).code).toBe("DISPOSED");
  });

  it("disposes from inside its own host function without crashing", async () => {
    const sb = new Sandbox();
    sb.defineAsyncFunction("selfDestruct", async () => {
      sb.dispose();
      return 1;
    });
    const err = await rejected(sb.eval("await selfDestruct(); 'after'"));
    expect(err.code).toBe("DISPOSED");
  });

  it("disposes from inside a sync host function called by evalSync without crashing", () => {
    const sb = new Sandbox();
    sb.defineFunction("selfDestructInline", () => {
      sb.dispose();
      return 1;
    });
    let code: string | undefined;
    try {
      sb.evalSync("selfDestructInline(); 'after'");
    } catch (err) {
      code = (err as SandboxError).code;
    }
    expect(code).toBe("DISPOSED");
    expect(sb.disposed).toBe(true);
  });

  it("disposes from inside a sync host function without crashing", async () => {
    const sb = new Sandbox();
    sb.defineFunction("selfDestructSync", () => {
      sb.dispose();
      return 1;
    });
    const err = await rejected(sb.eval("selfDestructSync(); while (true) {}"));
    expect(err.code).toBe("DISPOSED");
  });
});

describe("the Node event loop keeps running while guests spin", () => {
  // The budgets are CPU time: on a loaded machine two 2 s budgets took longer than 30 s of wall
  // time, so the budget is 1 s and the test has a long timeout.
  it("keeps a 10 ms interval firing while two sandboxes spin for 1 s of CPU time, then both time out and evaluate 1+1", async () => {
    const a = sandbox({ executionTimeoutMs: 1000 });
    const b = sandbox({ executionTimeoutMs: 1000 });
    let last = performance.now();
    let maxGap = 0;
    let ticks = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
      ticks++;
    }, 10);
    const started = performance.now();
    const settled = await Promise.allSettled([a.eval("while (true) {}"), b.eval("while (true) {}")]);
    clearInterval(timer);
    const elapsed = performance.now() - started;
    console.info(`event loop: max interval gap ${maxGap.toFixed(1)} ms over ${elapsed.toFixed(0)} ms (${ticks} ticks)`);
    expect(settled.map((s) => (s.status === "rejected" ? (s.reason as SandboxError).code : "fulfilled"))).toEqual([
      "TIMEOUT",
      "TIMEOUT",
    ]);
    expect(elapsed).toBeGreaterThanOrEqual(950);
    // Guests blocking the loop would leave one gap spanning the whole run (and a tick or two); a
    // loaded machine delays single ticks, not half of the run.
    expect(maxGap).toBeLessThan(elapsed / 2);
    expect(ticks).toBeGreaterThan(10);
    expect(await a.eval("1+1")).toBe(2);
    expect(await b.eval("1+1")).toBe(2);
  }, 120_000);
});
