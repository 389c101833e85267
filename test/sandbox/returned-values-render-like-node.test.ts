// A value the guest returns renders the way Node renders the same value: an Error as
// `TypeError: bad thing\n    at <eval> ...` (QuickJS's own stacks hold only the frames, and
// `util.inspect` prints `stack`), an instance of a guest class with its class name.
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { renderValue, SandboxError } from "../../src/index.js";
import { decodeValue } from "../../src/marshal.js";
import { Tag } from "../../src/wire.js";
import { formatEvalOutput } from "../../src/langchain/format.js";
import { RENDER_OPTIONS } from "../../src/render.js";
import { sandbox } from "../hostile/harness.js";

describe("a returned Error keeps its name and message", () => {
  it("the host Error's stack starts `Name: message`, then the guest frames", () => {
    const err = sandbox().evalSync("new TypeError('bad thing')") as Error;
    expect(err).toBeInstanceOf(TypeError);
    expect(err.stack).toMatch(/^TypeError: bad thing\n {4}at <eval> \(<eval>:1:\d+\)$/);
    expect(inspect(err)).toBe(err.stack);
  });

  it("renders nested in an object, in renderValue and in util.inspect", () => {
    const value = sandbox().evalSync("({ err: new TypeError('bad thing') })");
    for (const text of [renderValue(value), inspect(value)]) {
      expect(text).toMatch(/^\{\n {2}err: TypeError: bad thing\n {6}at <eval> \(<eval>:1:\d+\)\n\}$/);
    }
  });

  it("shows the message of every per-item error in the eval tool's output", () => {
    const report = sandbox().runSync("[1, 2].map((i) => new RangeError('item ' + i + ' failed'))");
    const output = formatEvalOutput(report, { maxResultChars: 4000 });
    expect(output).toContain("RangeError: item 1 failed");
    expect(output).toContain("RangeError: item 2 failed");
  });

  it("keeps a custom error name as the guest set it, without Node's `Error [Name]` form", () => {
    const value = sandbox().evalSync(
      "class ValidationError extends Error { constructor(m) { super(m); this.name = 'ValidationError'; } }; new ValidationError('no')",
    );
    expect(renderValue(value)).toMatch(/^ValidationError: no\n {4}at /);
  });

  it("an error without a message shows its name alone", () => {
    expect(renderValue(sandbox().evalSync("new Error()"))).toMatch(/^Error\n {4}at <eval>/);
  });

  it("bounds a guest-planted stack and keeps host frames out", () => {
    const err = sandbox().evalSync("const e = new Error('big'); e.stack = 'x'.repeat(100000); e") as Error;
    expect(err.stack!.startsWith("Error: big\nxxx")).toBe(true);
    expect(err.stack!.length).toBeLessThan(9000);
    expect(err.stack).not.toMatch(/node:|\.ts:|\.js:/);
  });

  it("a thrown error still reports its frames apart from its name and message", () => {
    const report = sandbox().runSync("throw new TypeError('bad')");
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.error.guest?.stack).toMatch(/^ {4}at <eval>/);
  });
});

describe("an instance of a guest class renders with its class name", () => {
  it("as util.inspect shows one: `P { x: 1 }`", () => {
    expect(renderValue(sandbox().evalSync("class P { constructor() { this.x = 1; } }; new P()"))).toBe("P { x: 1 }");
  });

  it("nested, empty, inherited and too deep to expand, as util.inspect shows the same host value", () => {
    const build = `class A { constructor() { this.n = 1; } }; class B extends A { constructor() { super(); this.y = 2; } }; function F() { this.z = 3; };
      ({ a: new A(), b: new B(), f: new F(), deep: [[[[[[[new A()]]]]]]], plain: {}, bare: Object.create({}) })`;
    const host = new Function(build.replace("({", "return ({"))() as unknown;
    const shown = renderValue(sandbox().evalSync(build));
    expect(shown).toBe(inspect(host, RENDER_OPTIONS));
    expect(shown).toContain("b: B { n: 1, y: 2 }");
  });

  it("the host value stays a plain object", () => {
    const value = sandbox().evalSync("class P { constructor() { this.x = 1; } }; new P()");
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(value).toEqual({ x: 1 });
  });

  it("reads the name without running guest code (a constructor getter, a Proxy prototype)", () => {
    const sb = sandbox();
    const value = sb.evalSync(
      "globalThis.ran = 0; const proto = {}; Object.defineProperty(proto, 'constructor', { get() { ran++; return function Evil() {}; } }); [Object.create(proto), Object.create(new Proxy({}, { get() { ran++; }, getOwnPropertyDescriptor() { ran++; } }))]",
    );
    expect(renderValue(value)).toBe("[ {}, {} ]");
    expect(sb.evalSync("ran")).toBe(0);
  });

  it("a class name longer than 256 characters is left out", () => {
    const value = sandbox().evalSync(
      "const C = class {}; Object.defineProperty(C, 'name', { value: 'N'.repeat(300) }); new C()",
    );
    expect(renderValue(value)).toBe("{}");
  });
});

describe("the class name on the wire is bounded", () => {
  it("refuses forged object data whose class name is longer than the engine writes", () => {
    const object = (nameLength: number): Buffer => {
      const bytes = Buffer.alloc(11 + nameLength, 0x41);
      bytes.writeUInt8(Tag.Object, 0);
      bytes.writeUInt8(2, 1); // a class name follows
      bytes.writeUInt8(Tag.Latin1, 2);
      bytes.writeUInt32LE(nameLength, 3);
      bytes.writeUInt32LE(0, 7 + nameLength); // no keys
      return bytes;
    };
    expect(renderValue(decodeValue(object(3)))).toBe("AAA {}");
    expect(() => decodeValue(object(257))).toThrow(/malformed class name/);
    expect(() => decodeValue(object(3).subarray(0, 8))).toThrow(SandboxError);
  });
});

describe("renderValue", () => {
  it("without a size renders within the default budget, never `NaN`", () => {
    expect(renderValue({ a: 1 })).toBe("{ a: 1 }");
    expect(renderValue("x".repeat(10))).toBe("'xxxxxxxxxx'");
  });
});
