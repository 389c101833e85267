import { describe, expect, it } from "vitest";
import { Sandbox, type SandboxError, isSandboxError, type SandboxErrorCode } from "../../src/index.js";
import { sandbox, caught, rejected } from "../hostile/harness.js";

describe("SYNTAX_ERROR", () => {
  it("reports a parse error with the guest SyntaxError's message", () => {
    const err = caught(() => sandbox().evalSync("let x = ;", { filename: "bad.js" }));
    expect(err.code).toBe("SYNTAX_ERROR");
    expect(err.guest?.name).toBe("SyntaxError");
    expect(err.guest?.message.length).toBeGreaterThan(0);
    expect(err.message).toContain("SyntaxError");
  });

  it("reports a parse error from async eval too", async () => {
    const err = await rejected(sandbox().eval("await (;"));
    expect(err.code).toBe("SYNTAX_ERROR");
  });

  it("tells a runtime SyntaxError (thrown by guest code) from a parse error", () => {
    const err = caught(() => sandbox().evalSync("JSON.parse('{')"));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest?.name).toBe("SyntaxError");
  });
});

describe("GUEST_ERROR", () => {
  it("carries the guest Error's name and message", () => {
    const err = caught(() => sandbox().evalSync("throw new TypeError('bad input')"));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest).toMatchObject({ name: "TypeError", message: "bad input" });
    expect(err.guest?.nonError).toBeFalsy();
    expect(err.message).toBe("TypeError: bad input");
  });

  it("carries the guest stack with function names and the filename", () => {
    const err = caught(() =>
      sandbox().evalSync("function deepFrame() { throw new Error('boom'); }\ndeepFrame();", { filename: "agent.js" }),
    );
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest?.stack).toContain("deepFrame");
    expect(err.guest?.stack).toContain("agent.js");
  });

  it("carries a guest Error subclass's own name", () => {
    const err = caught(() =>
      sandbox().evalSync(
        "class ToolError extends Error { constructor(m) { super(m); this.name = 'ToolError'; } }; throw new ToolError('nope')",
      ),
    );
    expect(err.guest).toMatchObject({ name: "ToolError", message: "nope" });
  });

  it('keeps a thrown string as the message (`throw "x"` shows x)', () => {
    const err = caught(() => sandbox().evalSync('throw "x"'));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest).toMatchObject({ message: "x", nonError: true });
    expect(err.message).toBe("x");
  });

  it.each([
    ["a number", "throw 42", "42"],
    ["undefined", "throw undefined", "undefined"],
    ["a plain object", "throw { code: 42 }", "code"],
  ])("keeps a thrown non-Error (%s) visible in the message", (_label, code, shown) => {
    const err = caught(() => sandbox().evalSync(code));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest?.nonError).toBe(true);
    expect(err.message).toContain(shown);
  });

  it("reports `throw null` (away from the memory limit) as a guest throw", () => {
    const err = caught(() => sandbox().evalSync("throw null"));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest?.nonError).toBe(true);
  });

  it("does not run getters of a thrown Error while reporting it", () => {
    const sb = sandbox();
    sb.evalSync("globalThis.getterHits = 0");
    const err = caught(() =>
      sb.evalSync(
        "const e = new Error('m'); Object.defineProperty(e, 'name', { get() { getterHits++; while (true) {} } }); Object.defineProperty(e, 'message', { get() { getterHits++; while (true) {} } }); throw e",
        { timeoutMs: 2000 },
      ),
    );
    expect(err.code).toBe("GUEST_ERROR");
    expect(sb.evalSync("getterHits")).toBe(0);
  });

  it("does not follow a thrown Proxy while reporting it", () => {
    const err = caught(() =>
      sandbox().evalSync("throw new Proxy({}, { get() { while (true) {} }, ownKeys() { while (true) {} } })", {
        timeoutMs: 2000,
      }),
    );
    expect(err.code).toBe("GUEST_ERROR");
  });

  it("does not let a guest fake OUT_OF_MEMORY or STACK_OVERFLOW with a look-alike error", () => {
    const sb = sandbox();
    const oom = caught(() =>
      sb.evalSync("const fake = new Error('out of memory'); fake.name = 'InternalError'; throw fake"),
    );
    expect(oom.code).toBe("GUEST_ERROR");
    const so = caught(() => sb.evalSync("throw new RangeError('Maximum call stack size exceeded')"));
    expect(so.code).toBe("GUEST_ERROR");
  });

  it("turns a host exception into a guest Error with the message only", () => {
    const sb = sandbox();
    sb.defineFunction("failing", () => {
      throw new Error("host secret path /etc/x");
    });
    const seen = sb.evalSync(
      "try { failing(); } catch (e) { [e instanceof Error, e.message, String(e.stack).includes('node:'), String(e.stack).includes('.ts')] }",
    );
    expect(seen).toEqual([true, "host secret path /etc/x", false, false]);
  });
});

describe("calling something that is not a function (deps/patches/0008)", () => {
  it.each([
    ["a method", "var o = {}; o.method(1, 2)", "o.method is not a function"],
    [
      "a missing tool",
      "var tools = { getStock() {} }; tools.get_stock({ symbol: 'X' })",
      "tools.get_stock is not a function",
    ],
    ["a nested property", "var a = { b: { c: {} } }; a.b.c.d()", "a.b.c.d is not a function"],
    ["a method of this", "(function () { this.missing() }).call({})", "this.missing is not a function"],
    ["a global", "var f = 1; f(f)", "f is not a function"],
    ["a local", "(function () { let g = 3; g(g, g) })()", "g is not a function"],
    ["a parameter", "(function (x) { x() })(5)", "x is not a function"],
    [
      "a method, with method calls among the arguments",
      "var o = { n() { return 1 } }; o.m(o.n(), o.n())",
      "o.m is not a function",
    ],
    // A conditional argument puts a branch between the callee and the call: no name then.
    ["a method with a conditional argument", "var o = {}; o.m(o.x ? 1 : 2)", "not a function"],
  ])("names the callee of %s, as Node does", (_label, code, message) => {
    const err = caught(() => sandbox().evalSync(code));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest?.name).toBe("TypeError");
    expect(err.guest?.message).toBe(message);
  });
});

describe("TIMEOUT", () => {
  it("says the execution budget ran out", async () => {
    const err = await rejected(sandbox({ executionTimeoutMs: 200 }).eval("while (true) {}"));
    expect(err.code).toBe("TIMEOUT");
    expect(err.budget).toBe("execution");
    expect(err.message).toMatch(/execution/);
  });

  it("says the wall budget ran out", async () => {
    const err = await rejected(sandbox({ executionTimeoutMs: 10_000, wallTimeoutMs: 200 }).eval("while (true) {}"));
    expect(err.code).toBe("TIMEOUT");
    expect(err.budget).toBe("wall");
    expect(err.message).toMatch(/wall/);
  });

  it("uses the per-eval timeoutMs over the sandbox default", () => {
    const sb = sandbox({ executionTimeoutMs: 60_000 });
    const report = sb.runSync("for (;;) {}", { timeoutMs: 150 });
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.error.code).toBe("TIMEOUT");
    expect(report.error.budget).toBe("execution");
    // The budget is the guest's CPU time (a loaded machine stretches the wall time, not this).
    expect(report.stats.executionMs).toBeGreaterThanOrEqual(150);
    expect(report.stats.executionMs).toBeLessThan(1500);
  });
});

describe("OUT_OF_MEMORY", () => {
  it("refuses a 200 MB typed array under a 64 MiB limit", () => {
    const sb = sandbox({ memoryLimitBytes: 64 * 1024 * 1024 });
    const err = caught(() => sb.evalSync("new Uint8Array(200e6)"));
    expect(err.code).toBe("OUT_OF_MEMORY");
    expect(sb.memoryUsage().usedBytes).toBeLessThan(64 * 1024 * 1024);
  });

  it("refuses many small ArrayBuffers adding up past the limit", () => {
    const sb = sandbox({ memoryLimitBytes: 16 * 1024 * 1024 });
    const err = caught(() =>
      sb.evalSync("const bufs = []; for (let i = 0; i < 1000; i++) bufs.push(new ArrayBuffer(1 << 20)); bufs.length"),
    );
    expect(err.code).toBe("OUT_OF_MEMORY");
  });

  it("reports a runaway object graph as OUT_OF_MEMORY", () => {
    const err = caught(() =>
      sandbox({ memoryLimitBytes: 16 * 1024 * 1024 }).evalSync(
        "const grow = []; while (true) grow.push({ n: grow.length });",
        { timeoutMs: 20_000 },
      ),
    );
    expect(err.code).toBe("OUT_OF_MEMORY");
  });

  it("lets the guest catch a failed allocation and carry on", () => {
    const sb = sandbox({ memoryLimitBytes: 64 * 1024 * 1024 });
    const seen = sb.evalSync(
      "let r; try { new Uint8Array(200e6); r = 'allocated'; } catch (e) { r = [e instanceof Error, String(e.message)]; } r",
    );
    expect(seen).toEqual([true, expect.stringMatching(/memory/)]);
    expect(sb.evalSync("new Uint8Array(1e6).length")).toBe(1e6);
  });

  it("ends an eval whose guest keeps swallowing out-of-memory errors", () => {
    const sb = sandbox({ memoryLimitBytes: 16 * 1024 * 1024 });
    let outcome: unknown;
    try {
      outcome = sb.evalSync(
        "const hold = []; let fails = 0; while (fails < 100000) { try { hold.push(new Uint8Array(1 << 20)); } catch { fails++; } } fails",
        { timeoutMs: 5000 },
      );
    } catch (err) {
      outcome = (err as SandboxError).code;
    }
    expect([100000, "OUT_OF_MEMORY", "TIMEOUT"]).toContain(outcome);
    expect(sb.evalSync("1+1")).toBe(2);
  });
});

describe("STACK_OVERFLOW", () => {
  it("reports uncaught deep recursion as STACK_OVERFLOW", () => {
    const err = caught(() => sandbox().evalSync("function f() { return f() + 1; } f()"));
    expect(err.code).toBe("STACK_OVERFLOW");
  });

  it("lets the guest catch deep recursion as a RangeError", () => {
    const seen = sandbox().evalSync(
      "function f() { return f() + 1; } let r; try { f(); } catch (e) { r = [e instanceof RangeError, e.name]; } r",
    );
    expect(seen).toEqual([true, "RangeError"]);
  });

  it("enforces a small maxStackSizeBytes", () => {
    const depthOf = (maxStackSizeBytes: number): number =>
      sandbox({ maxStackSizeBytes }).evalSync(
        "let d = 0; function g() { d++; g(); } try { g(); } catch {} d",
      ) as number;
    const small = depthOf(128 * 1024);
    const large = depthOf(2 * 1024 * 1024);
    expect(small).toBeGreaterThan(10);
    expect(large).toBeGreaterThan(small * 4);
  });

  it("reports deep recursion on the executor thread as STACK_OVERFLOW", async () => {
    const err = await rejected(sandbox().eval("function f() { return f() + 1; } await null; f()"));
    expect(err.code).toBe("STACK_OVERFLOW");
  });
});

describe("INVALID_ARGUMENT", () => {
  it.each([
    ["a non-object", 5],
    ["an unknown option", { memoryLimit: 1 }],
    ["a negative memory limit", { memoryLimitBytes: -1 }],
    ["a string memory limit", { memoryLimitBytes: "64" }],
    ["a tiny memory limit", { memoryLimitBytes: 10 }],
    ["a fractional stack size", { maxStackSizeBytes: 65536.5 }],
    ["a zero timeout", { executionTimeoutMs: 0 }],
    ["a NaN timeout", { executionTimeoutMs: NaN }],
    ["an infinite wall timeout", { wallTimeoutMs: Infinity }],
    ["a non-boolean captureConsole", { captureConsole: "yes" }],
    ["a negative console cap", { maxConsoleBytes: -1 }],
  ])("refuses Sandbox options with %s", (_label, options) => {
    const err = caught(() => new Sandbox(options as never));
    expect(err.code).toBe("INVALID_ARGUMENT");
  });

  it.each([
    ["non-string code", 42, undefined],
    ["an unknown eval option", "1", { timeout: 5 }],
    ["a negative timeoutMs", "1", { timeoutMs: -1 }],
    ["a signal that is not an AbortSignal", "1", { signal: {} }],
    ["a bad unserializable mode", "1", { unserializable: "ignore" }],
    ["a non-string filename", "1", { filename: 5 }],
  ])("refuses evalSync with %s", (_label, code, options) => {
    const err = caught(() => sandbox().evalSync(code as never, options as never));
    expect(err.code).toBe("INVALID_ARGUMENT");
  });

  it("refuses async eval with bad options, as a rejection", async () => {
    const err = await rejected(sandbox().eval("1", { wallTimeoutMs: -5 }));
    expect(err.code).toBe("INVALID_ARGUMENT");
  });

  it.each([
    ["an empty name", ""],
    ["a name with spaces", "a b"],
    ["an empty path segment", "tools..x"],
    ["a prototype segment", "tools.prototype"],
  ])("refuses defineFunction with %s", (_label, name) => {
    const err = caught(() => sandbox().defineFunction(name, () => 1));
    expect(err.code).toBe("INVALID_ARGUMENT");
  });

  it("refuses defineFunction with a non-function", () => {
    expect(caught(() => sandbox().defineFunction("x", 5 as never)).code).toBe("INVALID_ARGUMENT");
  });

  it("keeps the sandbox usable after refusing bad eval options", () => {
    const sb = sandbox();
    caught(() => sb.evalSync("1", { timeoutMs: 0 }));
    expect(sb.evalSync("1+1")).toBe(2);
  });
});

describe("DISPOSED", () => {
  it.each<[string, (sb: Sandbox) => unknown]>([
    ["evalSync", (sb) => sb.evalSync("1")],
    ["runSync", (sb) => sb.runSync("1")],
    ["setGlobal", (sb) => sb.setGlobal("a", 1)],
    ["getGlobal", (sb) => sb.getGlobal("a")],
    ["defineFunction", (sb) => sb.defineFunction("f", () => 1)],
    ["memoryUsage", (sb) => sb.memoryUsage()],
  ])("refuses %s on a disposed sandbox", (_label, use) => {
    const sb = new Sandbox();
    sb.dispose();
    expect(sb.disposed).toBe(true);
    expect(caught(() => use(sb)).code).toBe("DISPOSED");
  });

  it("rejects eval and run on a disposed sandbox", async () => {
    const sb = new Sandbox();
    sb[Symbol.dispose]();
    expect((await rejected(sb.eval("1"))).code).toBe("DISPOSED");
    const report = await sb.run("1");
    expect(report.ok).toBe(false);
    if (!report.ok) expect(report.error.code).toBe("DISPOSED");
  });
});

describe("BUSY", () => {
  it("refuses a sync host function re-entering its own sandbox with evalSync", () => {
    const sb = sandbox();
    const seen: unknown[] = [];
    sb.defineFunction("reenter", () => {
      try {
        sb.evalSync("1");
        seen.push("ran");
      } catch (err) {
        seen.push(err);
      }
      return 0;
    });
    expect(sb.evalSync("reenter(); 'outer done'")).toBe("outer done");
    expect(seen).toHaveLength(1);
    expect(isSandboxError(seen[0], "BUSY")).toBe(true);
  });

  it("refuses a sync host function touching its own sandbox's globals", () => {
    const sb = sandbox();
    const codes: SandboxErrorCode[] = [];
    sb.defineFunction("poke", () => {
      for (const use of [
        () => sb.setGlobal("g", 1),
        () => sb.getGlobal("g"),
        () => sb.defineFunction("late", () => 1),
      ]) {
        try {
          use();
        } catch (err) {
          codes.push((err as SandboxError).code);
        }
      }
    });
    sb.evalSync("poke()");
    expect(codes).toEqual(["BUSY", "BUSY", "BUSY"]);
  });

  it("refuses a sync host function starting an async eval of its own sandbox", async () => {
    const sb = sandbox();
    let inner: Promise<unknown> | undefined;
    sb.defineFunction("spawn", () => {
      inner = sb.eval("1");
      inner.catch(() => {});
      return 1;
    });
    expect(await sb.eval("spawn()")).toBe(1);
    expect((await rejected(inner!)).code).toBe("BUSY");
  });

  it("refuses an async host function awaiting an eval of its own sandbox", async () => {
    const sb = sandbox();
    let innerError: unknown;
    sb.defineAsyncFunction("reenterAsync", async () => {
      await new Promise((r) => setTimeout(r, 5));
      try {
        return await sb.eval("1");
      } catch (err) {
        innerError = err;
        return "refused";
      }
    });
    expect(await sb.eval("await reenterAsync()")).toBe("refused");
    expect(isSandboxError(innerError, "BUSY")).toBe(true);
  });

  it("refuses synchronous use of a sandbox while its async eval runs", async () => {
    const sb = sandbox();
    const running = sb.eval("while (true) {}", { timeoutMs: 300 }).catch((e: SandboxError) => e.code);
    await new Promise((r) => setTimeout(r, 20));
    const codes: string[] = [];
    for (const use of [
      () => sb.evalSync("1"),
      () => sb.setGlobal("g", 1),
      () => sb.getGlobal("g"),
      () => sb.defineFunction("late", () => 1),
    ]) {
      try {
        use();
        codes.push("ran");
      } catch (err) {
        codes.push((err as SandboxError).code);
      }
    }
    expect(codes).toEqual(["BUSY", "BUSY", "BUSY", "BUSY"]);
    expect(await running).toBe("TIMEOUT");
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("lets a host function use a different sandbox", async () => {
    const sb = sandbox();
    const other = sandbox();
    sb.defineFunction("viaOther", (x) => other.evalSync(`${Number(x)} * 2`));
    expect(sb.evalSync("viaOther(21)")).toBe(42);
    sb.defineAsyncFunction("viaOtherAsync", async ([x]) => other.eval(`${Number(x)} * 3`));
    expect(await sb.eval("await viaOtherAsync(5)")).toBe(15);
  });
});
