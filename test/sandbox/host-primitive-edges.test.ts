// The fast path of sync host calls (at most 3 primitive arguments, strings of at most 256 UTF-16
// units) must give exactly what the codec path gives. Every row runs the same call three ways:
// `fast` (inline eval, the call as written), `codec` (inline eval, three extra arguments: more
// than the fast path carries) and `offThread` (an async eval: the guest waits on an executor
// thread while the main thread answers through the codec).
import { describe, expect, it } from "vitest";
import { SandboxError, type Sandbox } from "../../src/index.js";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test
import { ARGUMENTS, RESULTS, THROWN } from "./primitive-rows.js";

const PATHS = ["fast", "codec", "offThread"] as const;
type Path = (typeof PATHS)[number];

/** `fn(args)` as `path` calls it. */
function callOf(path: Path, fn: string, args: string): string {
  return path === "codec" ? `${fn}(${args}, 0, 0, 0)` : `${fn}(${args})`;
}

/** Runs `code` (an expression) the way `path` does. */
async function run(sb: Sandbox, path: Path, code: string): Promise<unknown> {
  return path === "offThread" ? sb.eval(code) : sb.evalSync(code);
}

/** What a run gave: its value, or the code and message of the SandboxError it threw. */
async function outcome(sb: Sandbox, path: Path, code: string): Promise<unknown> {
  try {
    return { value: await run(sb, path, code) };
  } catch (err) {
    if (!(err instanceof SandboxError)) throw err;
    return { code: err.code, message: err.message };
  }
}

describe("the sync host-call fast path agrees with the codec path", () => {
  it.each(ARGUMENTS)("passes %s to the host and back unchanged", async (expr) => {
    const expected: unknown = new Function(`return ${expr}`)();
    const rows = [];
    for (const path of PATHS) {
      const sb = sandbox();
      const received: unknown[] = [];
      sb.defineFunction("echo", (...args: unknown[]) => {
        received.push(args[0]);
        return args[0];
      });
      const back = await run(
        sb,
        path,
        `(() => { const v = ${expr}; const r = ${callOf(path, "echo", "v")}; return [Object.is(r, v), r]; })()`,
      );
      expect(received.length, path).toBe(1);
      expect(Object.is(received[0], expected), `${path}: the host got ${expr}`).toBe(true);
      expect((back as unknown[])[0], `${path}: the guest got ${expr} back`).toBe(true);
      rows.push(back);
    }
    expect(rows[0]).toStrictEqual(rows[1]);
    expect(rows[0]).toStrictEqual(rows[2]);
  });

  it.each(RESULTS.map((value, i) => [i, value] as const))(
    "returns host result #%i to the guest as the codec does",
    async (i, value) => {
      const rows = [];
      for (const path of PATHS) {
        const sb = sandbox();
        sb.defineFunction("give", () => RESULTS[i]);
        const got = await run(
          sb,
          path,
          `(() => { const r = ${callOf(path, "give", String(i))}; return [typeof r, Object.is(r, -0), r]; })()`,
        );
        rows.push(got);
      }
      expect((rows[0] as unknown[])[2]).toStrictEqual(value);
      expect(rows[0]).toStrictEqual(rows[1]);
      expect(rows[0]).toStrictEqual(rows[2]);
    },
  );

  it.each(THROWN.map((thrown, i) => [i, thrown] as const))(
    "turns host throw #%i into the same guest exception",
    async (_i, thrown) => {
      const rows = [];
      for (const path of PATHS) {
        const sb = sandbox();
        sb.defineFunction("fail", () => {
          throw thrown();
        });
        rows.push(
          await run(
            sb,
            path,
            `try { ${callOf(path, "fail", "1")}; 'no throw' } catch (e) { [typeof e, e instanceof Error, e.name, e.message] }`,
          ),
        );
      }
      expect((rows[0] as unknown[])[1]).toBe(true);
      expect(rows[0]).toStrictEqual(rows[1]);
      expect(rows[0]).toStrictEqual(rows[2]);
    },
  );

  it("runs a host function that evaluates in another sandbox, whose host calls take either path", async () => {
    const rows = [];
    for (const path of PATHS) {
      const sb = sandbox();
      const other = sandbox();
      other.defineFunction("twice", (x: unknown) => Number(x) * 2);
      sb.defineFunction("viaOther", (x: unknown) =>
        other.evalSync(`${callOf(path === "codec" ? "codec" : "fast", "twice", String(x))} + twice('1')`),
      );
      rows.push(
        await outcome(sb, path, `let s = 0; for (let i = 0; i < 100; i++) s += ${callOf(path, "viaOther", "i")}; s`),
      );
    }
    expect(rows[0]).toStrictEqual({ value: 9900 + 100 * 2 });
    expect(rows[0]).toStrictEqual(rows[1]);
    expect(rows[0]).toStrictEqual(rows[2]);
  });

  it("refuses a host function's eval in its own sandbox on every path", async () => {
    const rows = [];
    for (const path of PATHS) {
      const sb = sandbox();
      sb.defineFunction("reenter", () => {
        try {
          return sb.evalSync("1");
        } catch (err) {
          return (err as SandboxError).code;
        }
      });
      rows.push(await outcome(sb, path, callOf(path, "reenter", "'x'")));
    }
    expect(rows[0]).toStrictEqual({ value: "BUSY" });
    expect(rows[0]).toStrictEqual(rows[1]);
    expect(rows[0]).toStrictEqual(rows[2]);
  });

  it("ends the eval as DISPOSED when the host function disposes its own sandbox, on every path", async () => {
    const rows = [];
    for (const path of PATHS) {
      const sb = sandbox();
      sb.defineFunction("bye", () => {
        sb.dispose();
        return 1;
      });
      rows.push(await outcome(sb, path, `let r; try { r = ${callOf(path, "bye", "1")} } catch (e) { r = 'caught' } r`));
      expect(() => sb.evalSync("1"), path).toThrow(SandboxError);
    }
    expect(rows[0]).toMatchObject({ code: "DISPOSED" });
    expect(rows[0]).toStrictEqual(rows[1]);
    expect(rows[0]).toStrictEqual(rows[2]);
  });

  it("keeps working past many calls in one eval, with calls of other kinds in between", () => {
    // Crosses the addon's per-run handle scopes (64 calls each) with codec calls and throws between.
    const sb = sandbox();
    sb.defineFunction("inc", (x: unknown) =>
      x === "throw"
        ? (() => {
            throw new Error("t");
          })()
        : typeof x === "number"
          ? x + 1
          : x,
    );
    const total = sb.evalSync(`
      let s = 0;
      for (let i = 0; i < 1000; i++) {
        s += inc(i);
        if (i % 97 === 0) s += inc({ n: 1 }).n;
        if (i % 89 === 0) try { inc('throw') } catch { s += 1 }
        if (i % 83 === 0) s += inc('x'.repeat(300)).length;
      }
      s`);
    const calls = (n: number): number => Math.floor(999 / n) + 1;
    expect(total).toBe((1000 * 1001) / 2 + calls(97) + calls(89) + 300 * calls(83));
  });
});
