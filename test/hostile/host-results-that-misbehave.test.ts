// Hazard: host functions and tools whose results misbehave on the way into the guest (issue 27,
// item 11): a result whose `then` cannot be read left the guest's `await` hanging until the wall
// budget; a returned (not thrown) Error carried the host's stack, with server file paths, to the
// guest and the model; a SharedArrayBuffer became `{}`; a tool result's own `"__proto__"` key was
// lost; a view whose buffer was shrunk under it failed with an untyped engine error.
import { describe, expect, it } from "vitest";
import { toGuestValue } from "../../src/langchain/ptc.js";
import { SandboxError } from "../../src/index.js";
import { sandbox } from "./harness.js";

/** Guest code awaiting `give()` that reports how it ended. */
const AWAIT_GIVE = "try { await give(); 'resolved' } catch (e) { [e instanceof Error, String(e.message).length > 0] }";

describe("an async host result whose `then` cannot be read rejects the guest's await at once", () => {
  const revoked = (): unknown => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  };
  const RESULTS: Record<string, () => unknown> = {
    "an object whose then getter throws": () => ({
      get then(): never {
        throw new Error("no then for you");
      },
    }),
    "a revoked Proxy": revoked,
    "a Proxy whose get trap throws": () =>
      new Proxy(
        {},
        {
          get(): never {
            throw new Error("trap");
          },
        },
      ),
  };

  it.each(Object.entries(RESULTS))("%s", async (_name, make) => {
    const sb = sandbox({ wallTimeoutMs: 10_000 });
    sb.defineAsyncFunction("give", make);
    const report = await sb.run(AWAIT_GIVE);
    expect(report.ok ? report.value : report.error.code).toEqual([true, true]);
    expect(await sb.eval("1 + 1")).toBe(2);
  });
});

describe("a returned Error crosses as a thrown one does: name and message, no host stack", () => {
  const hostStack = /host-results-that-misbehave|node:internal|file:\/\//;

  it("from a sync host function", () => {
    const sb = sandbox();
    sb.defineFunction("give", () => new TypeError("boom"));
    const [name, message, stack] = sb.evalSync(
      "{ const e = give(); [e.name, e.message, String(e.stack)] }",
    ) as string[];
    expect([name, message]).toEqual(["TypeError", "boom"]);
    expect(stack).not.toMatch(hostStack);
  });

  it("from an async host function, in Promise.allSettled's reasons", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("settled", async () =>
      Promise.allSettled([Promise.reject(new RangeError("nope")), Promise.resolve(1)]),
    );
    const [name, message, stack] = (await sb.eval(
      "const [r] = await settled(); [r.reason.name, r.reason.message, String(r.reason.stack)]",
    )) as string[];
    expect([name, message]).toEqual(["RangeError", "nope"]);
    expect(stack).not.toMatch(hostStack);
  });

  it("given to setGlobal", () => {
    const sb = sandbox();
    sb.setGlobal("given", new Error("kept"));
    expect(sb.evalSync("given.message")).toBe("kept");
    expect(String(sb.evalSync("String(given.stack)"))).not.toMatch(hostStack);
  });
});

describe("a SharedArrayBuffer result is refused with a typed error, as views on one are", () => {
  it("from a sync host function, an async one and setGlobal", async () => {
    const sb = sandbox();
    sb.defineFunction("give", () => ({ shared: new SharedArrayBuffer(8) }));
    sb.defineAsyncFunction("giveLater", async () => new SharedArrayBuffer(8));
    expect(sb.evalSync("try { give(); 'copied' } catch (e) { /SharedArrayBuffer/.test(e.message) }")).toBe(true);
    expect(await sb.eval("try { await giveLater(); 'copied' } catch (e) { /SharedArrayBuffer/.test(e.message) }")).toBe(
      true,
    );
    let thrown: unknown;
    try {
      sb.setGlobal("given", new SharedArrayBuffer(8));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SandboxError);
    expect((thrown as SandboxError).code).toBe("UNSERIALIZABLE");
  });
});

describe("a tool result's own '__proto__' key reaches the guest as a key", () => {
  it("kept as an own data property, with the prototype left alone", () => {
    const value = toGuestValue(JSON.parse('{ "__proto__": { "polluted": 1 }, "y": 2 }')).value as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(["__proto__", "y"]);
    const sb = sandbox();
    sb.defineFunction("give", () => value);
    expect(
      sb.evalSync("{ const v = give(); [Object.keys(v), v.polluted, Object.getPrototypeOf(v) === Object.prototype] }"),
    ).toEqual([["__proto__", "y"], undefined, true]);
  });
});

/** A view from byte 4 of an 8-byte resizable buffer, made by `make`, after the buffer shrank to 2 bytes. */
function shrunkPast<V>(make: (buffer: ArrayBuffer) => V): V {
  const buffer = new ArrayBuffer(8, { maxByteLength: 16 });
  const view = make(buffer);
  buffer.resize(2);
  return view;
}

describe("a view whose resizable buffer shrank past it fails typed", () => {
  const shrunk = (): DataView => shrunkPast((buffer) => new DataView(buffer, 4));

  it("from setGlobal, a sync host function and an async one", async () => {
    const sb = sandbox();
    let thrown: unknown;
    try {
      sb.setGlobal("given", shrunk());
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SandboxError);
    expect((thrown as SandboxError).code).toBe("UNSERIALIZABLE");
    sb.defineFunction("give", shrunk);
    sb.defineAsyncFunction("giveLater", async () => shrunk());
    const READ = (call: string): string =>
      `try { ${call}; 'copied' } catch (e) { [e instanceof Error, /out of bounds|detached/.test(e.message), /DataView\\.prototype/.test(e.message)] }`;
    expect(sb.evalSync(READ("give()"))).toEqual([true, true, false]);
    expect(await sb.eval(READ("await giveLater()"))).toEqual([true, true, false]);
  });
});

describe("a length-tracking typed array whose resizable buffer shrank past its offset", () => {
  it("crosses as it reads in JavaScript (empty), never as an untyped failure", () => {
    const shrunk = (): Uint8Array => shrunkPast((buffer) => new Uint8Array(buffer, 4));
    const sb = sandbox();
    sb.setGlobal("given", shrunk());
    sb.defineFunction("give", shrunk);
    expect(sb.evalSync("[given.constructor.name, given.length, give().length]")).toEqual(["Uint8Array", 0, 0]);
  });
});
