// Hazard: Sandbox.defineFrozenAsyncFunction (how the middleware installs `task`) ran a JavaScript
// snippet with runSync on the Node main thread, and the snippet called Object.freeze and
// Object.defineProperty: a guest that had replaced them ran its own function on the main thread
// inside the call (up to the 100 ms step budget), and could skip the freeze. The install is now
// native (native/frozen_global.cc): the function is made, frozen and defined through the C API, at
// once, so no guest code runs and the next eval sees it.
import { describe, expect, it } from "vitest";
import { FROZEN_SERVICE_SHAPE, frozenServiceShape, sandbox } from "./harness.js";

// Every built-in an install written in JavaScript would reach for, replaced by a function that
// calls the host's `mark`; a setter and getter of the name on Object.prototype; a Proxy as the
// global object's prototype whose traps mark too. (Descriptor reads and Object.isFrozen are kept
// for the checks that follow.)
const TAMPER = `
  const { defineProperty, setPrototypeOf, getPrototypeOf } = Object;
  const record = (what) => function () { mark(what); return arguments[0]; };
  defineProperty(Object.prototype, "service", { set: record("setter"), get: record("getter"), configurable: true });
  setPrototypeOf(globalThis, new Proxy(getPrototypeOf(globalThis), {
    defineProperty: record("trap defineProperty"), set: record("trap set"), getOwnPropertyDescriptor: record("trap getOwnPropertyDescriptor"),
  }));
  for (const [holder, label, names] of [
    [Object, "Object", ["freeze", "defineProperty", "defineProperties", "preventExtensions", "seal"]],
    [Reflect, "Reflect", ["defineProperty", "preventExtensions", "set", "get", "apply", "construct"]],
  ]) for (const name of names) holder[name] = record(label + "." + name);
  Function.prototype.call = record("Function.prototype.call");
  Function.prototype.apply = record("Function.prototype.apply");
  0`;

describe("installing a frozen host service", () => {
  it("runs none of the guest's replaced built-ins, setters or Proxy traps, and still installs the frozen function", async () => {
    const sb = sandbox();
    const marks: unknown[] = [];
    sb.defineFunction("mark", (args) => {
      marks.push(args[0]);
    });
    sb.evalSync(TAMPER);
    expect(sb.defineFrozenAsyncFunction("service", async (args) => ({ echoed: args[0] }))).toBe(true);
    expect(marks).toEqual([]);
    // What the guest sees: the same as what the JavaScript install made.
    expect(await frozenServiceShape(sb)).toEqual(FROZEN_SERVICE_SHAPE);
    expect(marks).toEqual([]);
  });
});
