// Hazard: host user code (getters, Proxy traps, iterators, overridden accessors) runs in the middle
// of encoding a host value, and uses another sandbox: that sandbox's eval writes its own bytes into
// the exchange buffer every sandbox of the process shares. A result encoded straight into that
// buffer then carries the other sandbox's data into this guest (issue 27, item 2). Every path that
// encodes a host value must come out whole, whatever runs while it is read.
import { describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/index.js";
import { sandbox } from "./harness.js";

const A = "A".repeat(40);
const C = "C".repeat(10);
const WHOLE = { a: A, b: "B", c: C };

/** Host values whose reading runs code that makes `other` write into the shared exchange buffer. */
function hostileValues(other: Sandbox): Record<string, () => unknown> {
  const clobber = (): void => {
    other.evalSync('({ a: "Z".repeat(40), p: 1, q: 2 })');
  };
  return {
    "a getter": () => ({
      a: A,
      get b() {
        clobber();
        return "B";
      },
      c: C,
    }),
    "a Proxy get trap": () =>
      new Proxy(
        { a: A, b: "B", c: C },
        {
          get(target, key) {
            if (key === "b") clobber();
            return Reflect.get(target, key);
          },
        },
      ),
    "a Map whose iterator runs code": () => {
      class LoudMap extends Map<string, string> {
        override *[Symbol.iterator](): MapIterator<[string, string]> {
          yield ["a", A];
          clobber();
          yield ["b", "B"];
          yield ["c", C];
        }
      }
      return {
        v: [
          A,
          new LoudMap([
            ["a", A],
            ["b", "B"],
            ["c", C],
          ]),
        ],
      };
    },
    "an Error whose message getter runs code": () => {
      const err = new Error("m");
      Object.defineProperty(err, "message", {
        get() {
          clobber();
          return C;
        },
      });
      return [A, err];
    },
  };
}

/** What the guest makes of `give()`'s result, as plain data it can compare across the boundary. */
const READ = `(() => { const v = give(PARAM); return JSON.stringify(v, (k, x) => x instanceof Map ? [...x] : x instanceof Error ? [x.name, x.message] : x); })()`;

function expected(name: string): string {
  if (name.startsWith("a Map"))
    return JSON.stringify({
      v: [
        A,
        [
          ["a", A],
          ["b", "B"],
          ["c", C],
        ],
      ],
    });
  if (name.startsWith("an Error")) return JSON.stringify([A, ["Error", C]]);
  return JSON.stringify(WHOLE);
}

describe("a host value whose reading runs code that uses another sandbox crosses whole", () => {
  const names = Object.keys(hostileValues(undefined as unknown as Sandbox));

  it.each(names)("%s, returned by a sync host function to an inline eval (primitive arguments)", (name) => {
    const other = sandbox();
    const sb = sandbox();
    sb.defineFunction("give", () => hostileValues(other)[name]!());
    expect(sb.evalSync(READ.replace("PARAM", ""))).toBe(expected(name));
  });

  it.each(names)("%s, returned by a sync host function to an inline eval (object arguments)", (name) => {
    const other = sandbox();
    const sb = sandbox();
    sb.defineFunction("give", () => hostileValues(other)[name]!());
    expect(sb.evalSync(READ.replace("PARAM", "{}"))).toBe(expected(name));
  });

  it.each(names)("%s, returned by a sync host function to an eval on an executor thread", async (name) => {
    const other = sandbox();
    const sb = sandbox();
    sb.defineFunction("give", () => hostileValues(other)[name]!());
    expect(await sb.eval(READ.replace("PARAM", "{}"))).toBe(expected(name));
  });

  it.each(names)("%s, resolved by an async host function", async (name) => {
    const other = sandbox();
    const sb = sandbox();
    sb.defineAsyncFunction("giveLater", async () => hostileValues(other)[name]!());
    sb.defineFunction("give", () => 0);
    const code = READ.replace("give(PARAM)", "await giveLater()").replace("(() =>", "(async () =>");
    expect(await sb.eval(`await ${code}`)).toBe(expected(name));
  });

  it.each(names)("%s, given to setGlobal", (name) => {
    const other = sandbox();
    const sb = sandbox();
    sb.setGlobal("given", hostileValues(other)[name]!());
    sb.defineFunction("give", () => 0);
    expect(sb.evalSync(READ.replace("give(PARAM)", "given"))).toBe(expected(name));
  });
});

describe("eval options read while an inline eval's value waits in the exchange buffer", () => {
  it("an options getter that uses another sandbox cannot change the reported value", () => {
    const other = sandbox();
    const sb = sandbox();
    let reads = 0;
    const options = {
      get timeoutMs() {
        if (++reads > 1) other.evalSync('({ a: "Z".repeat(40), p: 1, q: 2 })');
        return 5_000;
      },
    };
    expect(sb.runSync('({ a: "A".repeat(40), b: "B", c: "C".repeat(10) })', options).value).toEqual(WHOLE);
    expect(sb.evalSync('({ a: "A".repeat(40), b: "B", c: "C".repeat(10) })', options)).toEqual(WHOLE);
    expect(reads).toBe(2); // each eval read its options once
  });

  it("an options getter that answers differently later cannot slip past validation", async () => {
    const sb = sandbox();
    let reads = 0;
    const options = {
      get timeoutMs(): unknown {
        return ++reads === 1 ? 1_000 : "never";
      },
    };
    expect(await sb.eval("1 + 1", options as never)).toBe(2);
    expect(reads).toBe(1);
  });
});
