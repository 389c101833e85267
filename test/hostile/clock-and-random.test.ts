// Hazard: guest code reading the host's clock (timing attacks, nondeterministic runs) or its
// random generator state (upstream seeds Math.random from the time of day).
import { describe, expect, it } from "vitest";
import { sandbox, codeOf } from "./harness.js";

const BUSY_LOOP = "{ let x = 0; for (let i = 0; i < 2e5; i++) x += i; }";

describe("the default clock is frozen per eval", () => {
  it("keeps Date.now() and new Date() constant within an eval that runs for a while", async () => {
    const sb = sandbox();
    const [a, b, c] = (await sb.eval(
      `const a = Date.now(); ${BUSY_LOOP} [a, Date.now(), new Date().getTime()]`,
    )) as number[];
    expect(b).toBe(a);
    expect(c).toBe(a);
  });

  it("moves the frozen time forward between evals, to the host time at each eval's start", async () => {
    const sb = sandbox();
    const before = Date.now();
    const first = sb.evalSync("Date.now()") as number;
    await new Promise((r) => setTimeout(r, 30));
    const second = (await sb.eval("Date.now()")) as number;
    expect(first).toBeGreaterThanOrEqual(before);
    expect(second - first).toBeGreaterThanOrEqual(25);
    expect(second).toBeLessThanOrEqual(Date.now());
  });

  it("reports local time in UTC, hiding the host's time zone", () => {
    const sb = sandbox();
    expect(sb.evalSync("new Date(2020, 0, 1, 12).getTimezoneOffset()")).toBe(0);
    expect(sb.evalSync("new Date(2020, 0, 1, 12).toISOString()")).toBe("2020-01-01T12:00:00.000Z");
  });

  it("leaves no real clock reachable: no performance object", () => {
    const sb = sandbox();
    expect(sb.evalSync("typeof performance")).toBe("undefined");
  });
});

describe("a host-supplied clock", () => {
  it("is called once at each eval start and frozen for that eval", async () => {
    let calls = 0;
    const sb = sandbox({ clock: { now: () => 1_000_000_000_000 + 1000 * calls++ } });
    expect(await sb.eval(`const t = Date.now(); ${BUSY_LOOP} [t, Date.now(), new Date().toISOString()]`)).toEqual([
      1_000_000_000_000,
      1_000_000_000_000,
      "2001-09-09T01:46:40.000Z",
    ]);
    expect(sb.evalSync("Date.now()")).toBe(1_000_000_001_000);
    expect(calls).toBe(2);
  });

  it("fails the eval with INVALID_ARGUMENT when now() throws or returns a non-time", async () => {
    const throwing = sandbox({
      clock: {
        now: () => {
          throw new Error("clock down");
        },
      },
    });
    expect(await codeOf(() => throwing.eval("1"))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(() => throwing.evalSync("1"))).toBe("INVALID_ARGUMENT");
    for (const bad of [NaN, Infinity, 1e16, "12"]) {
      const sb = sandbox({ clock: { now: () => bad as number } });
      expect(await codeOf(() => sb.eval("1"))).toBe("INVALID_ARGUMENT");
    }
  });
});

describe('clock: "real"', () => {
  it("reads the system clock on every call", () => {
    const sb = sandbox({ clock: "real" });
    const [a, b] = sb.evalSync(
      `const a = Date.now(); { const end = a + 20; while (Date.now() < end) {} } [a, Date.now()]`,
    ) as number[];
    expect(b! - a!).toBeGreaterThanOrEqual(20);
  });
});

describe("Math.random", () => {
  const DRAW = "Array.from({ length: 8 }, () => Math.random())";

  it("gives the same sequence in two sandboxes with the same seed, and a different one for another seed", async () => {
    const a = sandbox({ randomSeed: 1234 });
    const b = sandbox({ randomSeed: 1234 });
    const c = sandbox({ randomSeed: 1235 });
    const seqA = a.evalSync(DRAW) as number[];
    expect(await b.eval(DRAW)).toEqual(seqA);
    expect(c.evalSync(DRAW)).not.toEqual(seqA);
    // The sequence continues across evals rather than restarting.
    expect(a.evalSync(DRAW)).not.toEqual(seqA);
    for (const x of seqA) expect(x >= 0 && x < 1).toBe(true);
  });

  it("seeds 0 and small integers into well-mixed, distinct sequences", () => {
    const zero = sandbox({ randomSeed: 0 }).evalSync(DRAW) as number[];
    const one = sandbox({ randomSeed: 1 }).evalSync(DRAW) as number[];
    expect(new Set(zero).size).toBe(8);
    expect(zero).not.toEqual(one);
  });

  it("is seeded from the host's CSPRNG by default (two unseeded sandboxes differ) and reports its seed", () => {
    const a = sandbox();
    const b = sandbox();
    expect(a.evalSync(DRAW)).not.toEqual(b.evalSync(DRAW));
    const replay = sandbox({ randomSeed: a.options.randomSeed });
    const fresh = sandbox({ randomSeed: b.options.randomSeed });
    expect(replay.evalSync(DRAW)).not.toEqual(fresh.evalSync(DRAW));
    expect(Number.isSafeInteger(a.options.randomSeed)).toBe(true);
  });

  it("replays an unseeded sandbox's sequence from the seed reported in its options", () => {
    const a = sandbox();
    const seq = a.evalSync(DRAW);
    expect(sandbox({ randomSeed: a.options.randomSeed }).evalSync(DRAW)).toEqual(seq);
  });

  it("rejects seeds that are not safe non-negative integers", async () => {
    for (const bad of [-1, 1.5, 2 ** 53, NaN, "7"]) {
      expect(await codeOf(() => sandbox({ randomSeed: bad as number }))).toBe("INVALID_ARGUMENT");
    }
  });
});

describe("an eval can be pinned to a clock and seed (to run it again exactly)", () => {
  it("clockMs and randomSeed give a second sandbox the same Date.now() and Math.random() sequence, even with the real clock", async () => {
    const code = "[Date.now(), Math.random(), Math.random(), new Date().getTimezoneOffset()]";
    const a = await sandbox({ clock: "real" }).eval(code, { clockMs: 1_700_000_000_000, randomSeed: 42 });
    const b = await sandbox().eval(code, { clockMs: 1_700_000_000_000, randomSeed: 42 });
    expect(b).toEqual(a);
    expect((a as number[])[0]).toBe(1_700_000_000_000);
    expect((a as number[])[3]).toBe(0);
  });

  it("the next eval without them is back on the sandbox's own clock", async () => {
    const sb = sandbox();
    await sb.eval("1", { clockMs: 0 });
    expect(await sb.eval("Date.now()")).toBeGreaterThan(1_000_000_000_000);
  });

  it("an inline eval pinned to the same clock as the last one, or back on a real clock, sees that clock", () => {
    const sb = sandbox({ clock: "real" });
    expect(sb.evalSync("Date.now()", { clockMs: 5 })).toBe(5);
    expect(sb.evalSync("Date.now()", { clockMs: 5 })).toBe(5);
    const [now, offset] = sb.evalSync("[Date.now(), new Date().getTimezoneOffset()]") as number[];
    expect(now).toBeGreaterThan(1_000_000_000_000);
    expect(offset).toBe(new Date().getTimezoneOffset());
  });

  it("an eval refused as busy sets no clock: the next eval with that clock still gets it", () => {
    const sb = sandbox();
    sb.defineFunction("reenter", () => {
      const report = sb.runSync("1", { clockMs: 7 });
      return report.ok ? "ran" : report.error.code;
    });
    expect(sb.evalSync("[Date.now(), reenter()]", { clockMs: 3 })).toEqual([3, "BUSY"]);
    expect(sb.evalSync("Date.now()", { clockMs: 7 })).toBe(7);
  });

  it("rejects a clockMs outside the Date range and a bad randomSeed with INVALID_ARGUMENT", async () => {
    const sb = sandbox();
    await expect(sb.eval("1", { clockMs: 9e15 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(sb.eval("1", { clockMs: Number.NaN })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(sb.eval("1", { randomSeed: -1 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });
});
