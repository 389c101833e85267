import { existsSync, readdirSync } from "node:fs";
import vm from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { bracketDepth, MAX_TYPESCRIPT_NESTING, transformCode } from "../../src/langchain/transform.js";

/**
 * A session of evals: the real engine once its addon is built, `node:vm` (same global-script
 * completion semantics, no top-level await) until then.
 */
interface Session {
  run(source: string): Promise<unknown>;
  dispose(): void;
}

const FILENAME = "<eval>";
// The engine is used as soon as both its addon and its TypeScript layer exist.
const addonBuilt =
  existsSync("src/sandbox.ts") &&
  existsSync("build/Release") &&
  readdirSync("build/Release").some((file) => file.endsWith(".node"));

interface EngineModule {
  Sandbox: new (
    options: Record<string, unknown>,
  ) => {
    eval(code: string, options: { filename: string }): Promise<unknown>;
    dispose(): void;
  };
}

async function openSession(): Promise<Session> {
  if (addonBuilt) {
    const engine = (await import("../../src/index.js" as string)) as EngineModule;
    const sandbox = new engine.Sandbox({});
    return {
      run: async (source) => sandbox.eval(transformCode(source).code, { filename: FILENAME }),
      dispose: () => sandbox.dispose(),
    };
  }
  const context = vm.createContext({});
  return {
    run: async (source) => new vm.Script(transformCode(source).code, { filename: FILENAME }).runInContext(context),
    dispose: () => undefined,
  };
}

/**
 * Line of the model's source that an error thrown by `source` points at, read from a V8 stack
 * (`node:vm`): this checks the lines the transform produces, whatever stacks the engine reports.
 */
function errorLine(source: string): number | undefined {
  const result = transformCode(source);
  let stack = "";
  try {
    new vm.Script(result.code, { filename: FILENAME }).runInContext(vm.createContext({}));
  } catch (error) {
    stack = (error as Error).stack ?? "";
  }
  const match = /<eval>:(\d+)/.exec(stack);
  if (!match) return undefined;
  const line = Number(match[1]);
  return result.lineMap ? result.lineMap(line) : line;
}

let sessions: Session[] = [];
async function session(): Promise<Session> {
  const opened = await openSession();
  sessions.push(opened);
  return opened;
}
afterEach(() => {
  for (const opened of sessions) opened.dispose();
  sessions = [];
});

describe("transformCode: plain JavaScript takes the fast path", () => {
  it("leaves code without top-level declarations untouched", () => {
    const result = transformCode("1 + 1");
    expect(result).toEqual({ code: "1 + 1", declaredNames: [], language: "javascript" });
  });

  it("keeps every line and column of a rewritten let/const declaration", () => {
    const source = "const a = 1;\nlet b = 2;\n  a + b";
    const { code } = transformCode(source);
    expect(code.split("\n").map((line) => line.length)).toEqual(source.split("\n").map((line) => line.length));
    expect(code.split("\n")[2]).toBe("  a + b");
  });

  it("keeps valid JavaScript `a < b > (c)` as two comparisons, not TypeScript type arguments", async () => {
    expect(transformCode("var a = 1, b = 2, c = 3\na < b > (c)").language).toBe("javascript");
    expect(await (await session()).run("var a = 1, b = 2, c = 3\na < b > (c)")).toBe(false);
    expect(await (await session()).run("var f = 5, T = 9\nf < T > (0)")).toBe(true);
  });

  it("reads type arguments as TypeScript where JavaScript cannot parse them", async () => {
    expect(transformCode("new Set<string>()").language).toBe("typescript");
    expect(
      await (await session()).run('const items = ["a", "b", "a"]\nnew Set<string>([...items]).size as number'),
    ).toBe(2);
  });

  it("reads type arguments on calls as TypeScript where JavaScript would compare against a type name", async () => {
    expect(transformCode("const arr = Array.from<number>([1, 2])\narr").language).toBe("typescript");
    expect(await (await session()).run("const arr = Array.from<number>([1, 2])\narr")).toEqual([1, 2]);
    expect(await (await session()).run('var items = ["a", "b", "a"]\nnew Set<string>(items).size')).toBe(2);
    expect(await (await session()).run("var pick = (x) => x\npick<string | number>(7)")).toBe(7);
  });

  it("keeps a comparison with a variable named like a type as JavaScript", async () => {
    expect(transformCode("var a = 1, number = 2, c = 3\na < number > (c)").language).toBe("javascript");
    expect(await (await session()).run("var a = 1, number = 2, c = 3\na < number > (c)")).toBe(false);
  });

  it("keeps the JavaScript reading when the TypeScript reading does not parse", () => {
    // A legacy octal literal is sloppy-mode JavaScript, and a syntax error to TypeScript.
    const result = transformCode("var a = 1, c = 2\na < number > (c); 010");
    expect(result.language).toBe("javascript");
    expect(result.syntaxError).toBeUndefined();
  });

  it("keeps a parenthesized comparison chain as JavaScript", async () => {
    expect(transformCode("(1 < 2) > 0").language).toBe("javascript");
    expect(await (await session()).run("(1 < 2) > 0")).toBe(true);
  });
});

describe("transformCode: completion value is the result", () => {
  it("returns the last expression statement's value", async () => {
    expect(await (await session()).run("let a = 2\na * 21")).toBe(42);
  });

  it("gives a lone declaration no value, as a script does", async () => {
    expect(await (await session()).run("const x = 1")).toBeUndefined();
  });

  it("lets a trailing declaration keep the previous statement's value", async () => {
    expect(await (await session()).run("'before'; const y = 2; function f() {}; class C {}")).toBe("before");
  });

  it("does not let a class declaration swallow a following parenthesized line", async () => {
    expect(await (await session()).run("class B {}\n(1 + 1)")).toBe(2);
  });
});

describe("transformCode: top-level declarations persist and may be re-declared", () => {
  it("carries const, let, class and function to the next eval", async () => {
    const s = await session();
    await s.run("const a = 1; let b = 2; class Acc { total() { return 3 } } function four() { return 4 }");
    expect(await s.run("a + b + new Acc().total() + four()")).toBe(10);
  });

  it("accepts a re-declaration of every kind in a later eval", async () => {
    const s = await session();
    await s.run("const x = 1; let y = 1; class K { v() { return 1 } } function f() { return 1 }");
    expect(
      await s.run(
        "const x = 2; let y = 3; class K { v() { return 4 } } function f() { return 5 }\nx + y + new K().v() + f()",
      ),
    ).toBe(14);
  });

  it("hoists a function declaration above its first use", async () => {
    expect(await (await session()).run("f()\nfunction f() { return 7 }")).toBe(7);
  });

  it("binds every name of a destructuring declaration", async () => {
    const s = await session();
    await s.run("const { a, b: [c, ...d], ...e } = { a: 1, b: [2, 3, 4], z: 5 }");
    expect(await s.run("[a, c, d, e]")).toEqual([1, 2, [3, 4], { z: 5 }]);
    expect(transformCode("const { a, b: [c, ...d], ...e } = o").declaredNames).toEqual(["a", "c", "d", "e"]);
  });

  it("keeps block-scoped declarations local to their block", async () => {
    const s = await session();
    await s.run("{ const hidden = 1 }");
    expect(await s.run("typeof hidden")).toBe("undefined");
  });

  it("reports the names of declared variables, functions and classes", () => {
    const result = transformCode(
      "var v = 1; const c = 2; function f(a) { return a }\nclass K extends Object { m() {} }",
    );
    expect(result.declaredNames).toEqual(["v", "c", "f", "K"]);
  });
});

describe("transformCode: TypeScript", () => {
  it.each([
    ["enum Color { Red, Green }; Color.Green", 1],
    ["namespace N { export const x = 1 }; N.x", 1],
    [
      "class P { constructor(private readonly x: number, public y = 2) {} sum() { return this.x + this.y } }\nnew P(1).sum()",
      3,
    ],
    [
      "abstract class Shape { abstract area(): number; twice() { return 2 * this.area() } }\nclass Sq extends Shape { area() { return 4 } }\nnew Sq().twice()",
      8,
    ],
    ["const cfg = { port: 80 } satisfies Record<string, number>; cfg.port", 80],
    ["const v = ({ y: 5 } as any)!.y as number; v", 5],
    ["function id<T>(x: T): T { return x }\nid<number>(3)", 3],
    ["interface Hit { id: number }\ntype Hits = Hit[]\nconst hits: Hits = [{ id: 1 }, { id: 2 }]\nhits.length", 2],
    ["let maybe: string | undefined = 'x'\nmaybe!.length", 1],
  ])("runs %j", async (source, expected) => {
    expect(transformCode(source).language).toBe("typescript");
    expect(await (await session()).run(source)).toBe(expected);
  });

  it("persists TypeScript declarations, enums and namespaces across evals", async () => {
    const s = await session();
    await s.run(
      "enum Level { Low = 1, High = 5 }\nconst base: number = 10\nfunction bump(n: number): number { return n + base }",
    );
    expect(await s.run("const base: number = 20\nbump(Level.High)")).toBe(25);
    expect(transformCode("enum Level { Low }\nnamespace Ns {}\nconst n: number = 1").declaredNames).toEqual([
      "Level",
      "n",
    ]);
  });

  it("reports a syntax error with the parser's message on the model's line", async () => {
    const source = "const a: number = 1\nconst b = (a +\n\nconst c = 3";
    const result = transformCode(source);
    expect(result.syntaxError).toMatchObject({ line: 4 });
    expect(result.syntaxError?.message).toMatch(/expected/);
    const s = await session();
    await expect(s.run(source)).rejects.toThrow(/expected/);
    expect(errorLine(source)).toBe(4);
  });
});

describe("transformCode: TypeScript annotations are erased in place", () => {
  it("erases annotations without transpiling, keeping every line and column", () => {
    const source = "const a: number = 1\nfunction f<T>(x: T, y?: string): T { return x }\nf<number>(a) as number";
    const result = transformCode(source);
    expect(result.stripping).toBe("erased");
    expect(result.lineMap).toBeUndefined();
    expect(result.code.split("\n").map((line) => line.length)).toEqual(source.split("\n").map((line) => line.length));
  });

  it.each([
    "enum E { A }",
    "namespace N { export const x = 1 }",
    "class P { constructor(public x: number) {} }",
    "const n = <number>(1 as unknown)",
  ])("transpiles what is not pure annotation: %s", (source) => {
    expect(transformCode(source).stripping).toBe("transpiled");
  });

  // Each snippet must give the same value erased as transpiled: the erasing path is an optimisation only.
  it.each([
    "interface A { a: number }\nconst v: A = { a: 2 }\nv.a",
    "type Pair<T> = [T, T]\nconst p: Pair<string> = ['a', 'b']\np.join('')",
    "abstract class S { abstract area(): number; protected readonly k: number = 2; twice(): number { return this.k * this.area() } }\nclass Q extends S implements Object { override area(): number { return 3 } }\nnew Q().twice()",
    "function over(a: string): string;\nfunction over(a: number): number;\nfunction over(a: any): any { return a }\nover(4)",
    "class Box<T> { declare tag: string; [key: string]: unknown; value?: T; constructor(v?: T) { this.value = v } }\nnew Box<number>(9).value",
    "let later!: number\nlater = 5\nlater",
    "const cfg = { retries: 3 } as const satisfies Record<string, number>\ncfg.retries",
    "const pick = <T,>(items: T[], i: number): T | undefined => items[i]\npick<string>(['x', 'y'], 1)",
    "try { throw new Error('e') } catch (e: unknown) { (e as Error).message }",
    "declare const external: number\ndeclare global { interface Window { x: number } }\ntypeof external",
    "class G { get size(): number { return 7 } set size(v: number) {} }\nnew G().size",
    "let maybe: string | null = 'abc'\nmaybe!.length",
    "const m = new Map<string, Array<number>>([['a', [1, 2]]])\nm.get('a')!.length",
    "function f(this: unknown, a: number) { return a }\nf(6)",
  ])("erasing and transpiling agree on %j", async (source) => {
    expect(transformCode(source).stripping).toBe("erased");
    const erased = await (await session()).run(source);
    const context = vm.createContext({});
    const transpiled: unknown = new vm.Script(transformCode(source, { exactTypeScript: true }).code).runInContext(
      context,
    );
    expect(erased).toEqual(transpiled);
  });

  it("keeps a removed declaration from joining the lines around it", async () => {
    const s = await session();
    expect(await s.run("let x = 1\ninterface A { a: number }\n(() => 5)()")).toBe(5);
    expect(await s.run("x")).toBe(1);
  });

  it("does not let a line after `as T` continue the expression once the type is erased", async () => {
    const source =
      "const seen: number[] = []\nconst list = [1, 2] as number[]\n[3, 4].forEach((n) => seen.push(n))\nseen.length + list.length";
    expect(await (await session()).run(source)).toBe(4);
  });

  it("does not let an erased member modifier join a computed member to the field above", async () => {
    const source =
      "const k = 'key'\nclass F {\n  a = 1\n  private [k] = 2\n  protected readonly b: number = 3\n}\nconst f: any = new F()\n;[f.a, f.key, f.b]";
    expect(transformCode(source).stripping).toBe("erased");
    expect(await (await session()).run(source)).toEqual([1, 2, 3]);
  });

  it("erases a return type that breaks the line before => by moving the `)`, keeping every line", async () => {
    const source = "const f = (a: number): {\n  v: number\n} => ({ v: a })\nf(2).v";
    const result = transformCode(source);
    expect(result.stripping).toBe("erased");
    expect(result.code.split("\n")).toHaveLength(4);
    expect(await (await session()).run(source)).toBe(2);
  });

  it("keeps the grouping of `a + b as T / c` (erasing `as T` alone would give `a + b / c`)", async () => {
    const source = "const half = 1 + 1 as number / 2\nhalf";
    expect(transformCode(source).stripping).toBe("transpiled");
    expect(await (await session()).run(source)).toBe(1);
  });

  it("gives a SyntaxError result for TypeScript nested too deeply to parse, not a host RangeError", () => {
    const result = transformCode(`const a: number = ${"[".repeat(40_000)}${"]".repeat(40_000)}`);
    expect(result.syntaxError?.message).toMatch(/nested too deeply/);
  });
});

describe("transformCode: the nesting bound on TypeScript counts only code", () => {
  it("counts (, [, { and template substitutions, not brackets in strings, comments or template text", () => {
    expect(bracketDepth("f([{ a: `${`${x}`}` }])", 100)).toBe(5);
    expect(bracketDepth(`"((((" + '[[[[' + \`{{{{\` // ((((\n/* [[[[ */ (1)`, 100)).toBe(1);
    expect(bracketDepth("'\\'(' + \"\\\"[\" + `\\`{`", 100)).toBe(0);
    expect(bracketDepth("((((((", 3)).toBe(4);
  });

  it("runs TypeScript whose strings and comments hold more brackets than the bound", async () => {
    const many = "(".repeat(MAX_TYPESCRIPT_NESTING + 10);
    const source = `// ${many}\nconst s: string = "${many}" + \`${many}\`\n/* ${many} */ s.length`;
    expect(transformCode(source)).toMatchObject({ language: "typescript", stripping: "erased" });
    expect(await (await session()).run(source)).toBe(2 * many.length);
  });

  it("runs TypeScript nested as deep as the bound", async () => {
    const depth = MAX_TYPESCRIPT_NESTING;
    const source = `const n: number = ${"(".repeat(depth)}7${")".repeat(depth)}\nn`;
    expect(transformCode(source).syntaxError).toBeUndefined();
    expect(await (await session()).run(source)).toBe(7);
    expect(
      transformCode(`const n: number = ${"(".repeat(depth + 1)}7${")".repeat(depth + 1)}`).syntaxError?.message,
    ).toMatch(/nested too deeply/);
  });
});

describe("transformCode: error line numbers refer to the model's code", () => {
  it("keeps JavaScript lines as written", async () => {
    expect(errorLine("const a = 1\nclass K {}\nnull.boom")).toBe(3);
  });

  it("maps TypeScript lines back through the emitted code", async () => {
    const source = [
      "interface Row {",
      "  id: number",
      "}",
      "enum Kind { A, B }",
      "const rows: Row[] = [{ id: 1 }]",
      "type Unused = string",
      "throw new Error('boom ' + rows.length)",
    ].join("\n");
    const result = transformCode(source);
    expect(result.language).toBe("typescript");
    expect(result.lineMap).toBeDefined();
    expect(errorLine(source)).toBe(7);
  });

  it("maps a line of a transpiled constructor past the lines its parameter properties add", () => {
    const source =
      "class P {\n  constructor(private x: number, public y: number) {\n    if (x > 0) throw new Error('positive')\n  }\n}\nnew P(1, 2)";
    const result = transformCode(source);
    expect(result.stripping).toBe("transpiled");
    // The emitted field declarations and `this.x = x` lines push the throw down...
    expect(result.code.split("\n").findIndex((line) => line.includes("throw")) + 1).toBeGreaterThan(3);
    // ...and the source map brings it back to the model's line 3.
    expect(errorLine(source)).toBe(3);
  });

  it("keeps erased TypeScript lines as written, a multi-line arrow return type included", () => {
    const source = "const f = (a: number): {\n  v: number\n} => {\n  throw new Error('boom')\n}\nf(1)";
    const result = transformCode(source);
    expect(result.stripping).toBe("erased");
    expect(result.lineMap).toBeUndefined();
    expect(errorLine(source)).toBe(4);
  });
});

describe.runIf(addonBuilt)("transformCode in the engine: top-level await", () => {
  it("persists a declaration initialised by await", async () => {
    const s = await session();
    await s.run("const fetched = await Promise.resolve(41)");
    expect(await s.run("fetched + 1")).toBe(42);
  });

  it("keeps the completion value after an await in TypeScript", async () => {
    expect(await (await session()).run("const n: number = await Promise.resolve(2)\nn * 3")).toBe(6);
  });
});
