// Hazard: the host decoding a large guest value on the Node main thread in one go. A guest that
// returns an object with 300,000 keys held the event loop 310 ms (557 ms at worst) while its
// result was turned into a JavaScript value, and the same held for host-call arguments and console
// output: every other session on the process waited. Values are now decoded a slice at a time
// (src/decode-queue.ts), with a turn of the event loop between slices.
//
// Counting turns is deterministic here: an inline eval runs the guest inside the call, so every
// turn of the loop from the call to the result is a turn between two decode slices (without
// slicing, there are none). The bound is a work measure: at most 10,000 keys decoded per turn,
// and at most 1,000 entries of a Map or Set.
import { describe, expect, it } from "vitest";
import { renderValue } from "../../src/render.js";
import { sandbox, codeOf } from "./harness.js";

const KEYS = 300_000;
const MAX_KEYS_PER_TURN = 10_000;
const MAX_ENTRIES_PER_TURN = 1_000;
const BUILD_BIG = `globalThis.big = {}; for (let i = 0; i < ${KEYS}; i++) big['k' + i] = i; 0`;

/** Counts turns of the event loop (setImmediate callbacks) until `stop()` is called. */
function countTurns(): { turns(): number; stop(): void } {
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    if (!counting) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    turns: () => turns,
    stop: () => {
      counting = false;
    },
  };
}

function expectBig(value: unknown): void {
  const keys = Object.keys(value as object);
  expect(keys.length).toBe(KEYS);
  expect(keys[0]).toBe("k0");
  expect((value as Record<string, number>)[`k${KEYS - 1}`]).toBe(KEYS - 1);
}

describe("decoding a large guest value never holds the event loop in one go", () => {
  it("keeps the event loop turning while a 300,000-key result is decoded", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    const pending = sb.eval("big", { inline: true });
    const loop = countTurns();
    const value = await pending;
    loop.stop();
    expectBig(value);
    expect(loop.turns()).toBeGreaterThanOrEqual(KEYS / MAX_KEYS_PER_TURN);
  });

  // A Map or Set entry costs V8 about what an object property does (it is hashed into a table that
  // grows): slices held 2,048 Map entries or 4,096 Set entries, 2-4 ms of the main thread each.
  for (const [kind, build, size] of [
    [
      "Map",
      `globalThis.big = new Map(); for (let i = 0; i < ${KEYS}; i++) big.set('k' + i, i); 0`,
      (v: unknown) => (v as Map<unknown, unknown>).size,
    ],
    [
      "Set",
      `globalThis.big = new Set(); for (let i = 0; i < ${KEYS}; i++) big.add('k' + i); 0`,
      (v: unknown) => (v as Set<unknown>).size,
    ],
  ] as const) {
    it(`builds a 300,000-entry ${kind} result a few hundred entries per turn of the event loop`, async () => {
      const sb = sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
      sb.evalSync(build);
      const pending = sb.eval("big", { inline: true });
      const loop = countTurns();
      const value = await pending;
      loop.stop();
      expect(size(value)).toBe(KEYS);
      expect(loop.turns()).toBeGreaterThanOrEqual(KEYS / MAX_ENTRIES_PER_TURN);
    });
  }

  it("keeps the event loop turning while a 300,000-key async host-call argument is decoded", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    let turnsAtCall = -1;
    let loop: ReturnType<typeof countTurns> | undefined;
    sb.defineAsyncFunction("take", ([arg]) => {
      turnsAtCall = loop!.turns();
      expectBig(arg);
      return Object.keys(arg as object).length;
    });
    const pending = sb.eval("await take(big)", { inline: true });
    loop = countTurns();
    expect(await pending).toBe(KEYS);
    loop.stop();
    expect(turnsAtCall).toBeGreaterThanOrEqual(KEYS / MAX_KEYS_PER_TURN);
  });

  it("keeps the event loop turning while the console record of a 300,000-key object is decoded", async () => {
    const sb = sandbox({ maxConsoleBytes: 4 * 1024 * 1024 }); // the engine keeps raw arguments up to twice that
    sb.evalSync(BUILD_BIG);
    const pending = sb.run("console.log(big); 'logged'", { inline: true });
    const loop = countTurns();
    const report = await pending;
    loop.stop();
    expect(report.ok && report.value).toBe("logged");
    expect(report.console[0]!.text).toContain("k0: 0,");
    expect(loop.turns()).toBeGreaterThanOrEqual(KEYS / MAX_KEYS_PER_TURN);
  });

  it("answers a sync host call with a 300,000-key argument, made from an executor thread, with the exact value", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    const got: unknown[] = [];
    sb.defineFunction("size", (arg) => got.push(arg) && Object.keys(arg as object).length);
    expect(await sb.eval("[size(big), size({ a: 1 })]")).toEqual([KEYS, 1]);
    expectBig(got[0]);
    expect(got[1]).toEqual({ a: 1 });
  });
});

describe("rendering a large decoded object", () => {
  it("shows the same head and count of further keys as for an object the host built, from the keys the decoder kept", async () => {
    const sb = sandbox();
    const decoded = (await sb.eval(`const o = {}; for (let i = 0; i < ${KEYS}; i++) o['k' + i] = i; o`)) as Record<
      string,
      number
    >;
    const built: Record<string, number> = {};
    for (let i = 0; i < KEYS; i++) built[`k${i}`] = i;
    for (const budget of [0, 50, 4000]) expect(renderValue(decoded, budget)).toBe(renderValue(built, budget));
    expect(renderValue([[[[[[[decoded]]]]]]], 100)).toBe(renderValue([[[[[[[built]]]]]]], 100));
    expect(renderValue(decoded, 50)).toMatch(/more keys/);
  });
});

describe("order and disposal while a large value is being decoded", () => {
  it("hands host calls to the host in the order the guest made them, even when an earlier one's arguments are still being decoded", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    const seen: string[] = [];
    sb.defineAsyncFunction("take", ([arg]) => void seen.push(`take ${Object.keys(arg as object).length}`));
    sb.defineFunction("note", (n) => void seen.push(`note ${String(n)}`));
    const lines: string[] = [];
    const code = "const p = take(big); note(1); console.log('after'); take({ k: 1 }); note(2); await p; 'done'";
    expect(await sb.eval(code, { onConsole: (line) => lines.push(line.text) })).toBe("done");
    expect(seen).toEqual([`take ${KEYS}`, "note 1", "take 1", "note 2"]);
    expect(lines).toEqual(["after"]);
  });

  it("keeps arguments exact when they span slices and the shared exchange buffer is reused meanwhile", async () => {
    const sb = sandbox();
    const got: unknown[] = [];
    sb.defineAsyncFunction("take", ([arg]) => void got.push(arg));
    // ~63 KB of small integers: fits the exchange buffer, takes more than one slice to decode.
    await sb.eval(
      "const a = Array.from({ length: 7000 }, (_, i) => i); take(a); take(a.map((x) => -x)); take('small'); 0",
    );
    expect(got).toHaveLength(3);
    expect(got[0]).toEqual(Array.from({ length: 7000 }, (_, i) => i));
    expect(got[1]).toEqual(Array.from({ length: 7000 }, (_, i) => (i === 0 ? -0 : -i)));
    expect(got[2]).toBe("small");
  });

  it("rejects with DISPOSED when the sandbox is disposed while its result is decoded", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    const pending = sb.eval("big", { inline: true });
    setImmediate(() => sb.dispose());
    expect(await codeOf(() => pending)).toBe("DISPOSED");
  });

  it("rejects with DISPOSED, and never calls the host, when the sandbox is disposed while a host-call argument is decoded", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    let called = false;
    sb.defineAsyncFunction("take", () => {
      called = true;
    });
    const pending = sb.eval("await take(big)", { inline: true });
    setImmediate(() => sb.dispose());
    expect(await codeOf(() => pending)).toBe("DISPOSED");
    expect(called).toBe(false);
  });

  it("rejects with DISPOSED when a host function disposes the sandbox while a sync call waits behind a large argument", async () => {
    const sb = sandbox();
    sb.evalSync(BUILD_BIG);
    let noted = 0;
    sb.defineAsyncFunction("take", () => sb.dispose());
    sb.defineFunction("note", () => void noted++);
    expect(await codeOf(() => sb.eval("take(big); note(); note(); 'not reached'"))).toBe("DISPOSED");
    expect(noted).toBe(0);
    // The process and other sandboxes carry on.
    expect(await sandbox().eval("6 * 7")).toBe(42);
  });
});

describe("async host-call arguments the host cannot re-create", () => {
  it("rejects the guest's promise with the reason at once, instead of leaving it pending until the wall budget", async () => {
    const sb = sandbox({ wallTimeoutMs: 60_000 });
    sb.defineAsyncFunction("take", () => "called");
    // Valid in QuickJS, not in this Node.js version's RegExp.
    const caught = await sb.eval("try { await take(/(?i:a)b/); 'resolved' } catch (e) { e.message }");
    expect(caught).toMatch(/valid in the sandbox but not in this Node\.js version/);
  });
});
