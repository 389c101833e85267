// A short eval usually ends while the main thread briefly waits for it, and is then answered
// before eval() returns, with no turn of the event loop. Whichever way an eval is answered (at
// once or through the event loop: that depends on timing), what the host sees must be the same:
// call order, console lines before the result, host calls before the result, dispose and abort,
// and the event loop must still turn during a loop of such evals.
import { describe, expect, it } from "vitest";
import { Sandbox, type SandboxError } from "../../src/index.js";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test

const outcome = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    (value) => value,
    (err: SandboxError) => err.code,
  );

describe("an eval answered before eval() returns", () => {
  it("keeps call order across short evals started together, with evalSync calls among them", async () => {
    const sb = sandbox();
    sb.evalSync("globalThis.order = []");
    const ran: number[] = [];
    const pending: Array<Promise<unknown>> = [];
    for (let i = 0; i < 300; i++) {
      if (i % 10 === 9) {
        // Runs only when every eval called before it has ended; else refuses.
        try {
          sb.evalSync(`order.push(${i})`);
          ran.push(i);
        } catch (err) {
          expect((err as SandboxError).code).toBe("BUSY");
        }
      } else {
        ran.push(i);
        pending.push(sb.eval(`order.push(${i}); ${i}`));
      }
    }
    expect(await Promise.all(pending)).toEqual(ran.filter((i) => i % 10 !== 9));
    expect(sb.evalSync("order")).toEqual(ran);
  });

  it("streams every console line to onConsole before its eval's promise settles, in order", async () => {
    const sb = sandbox();
    const events: string[] = [];
    const onConsole = (entry: { text: string }): void => {
      events.push(entry.text);
    };
    for (let i = 0; i < 100; i++) {
      expect(await sb.eval(`console.log("a${i}"); console.log("b${i}"); ${i}`, { onConsole })).toBe(i);
      events.push(`done ${i}`);
    }
    const started = Array.from({ length: 100 }, (_, i) =>
      sb.eval(`console.log("c${i}"); ${i}`, { onConsole }).then(() => events.push(`done c${i}`)),
    );
    await Promise.all(started);
    const expected = Array.from({ length: 100 }, (_, i) => [`a${i}`, `b${i}`, `done ${i}`]).flat();
    expected.push(...Array.from({ length: 100 }, (_, i) => [`c${i}`, `done c${i}`]).flat());
    expect(events).toEqual(expected);
  });

  it("reports console lines without a listener in the eval's own report", async () => {
    const sb = sandbox();
    for (let i = 0; i < 100; i++) {
      const report = await sb.run(`console.log("line ${i}"); ${i}`);
      expect(report).toMatchObject({ ok: true, value: i, console: [{ level: "log", text: `line ${i}` }] });
    }
  });

  it("hands a host call the guest did not await to the host before the eval's promise settles", async () => {
    const sb = sandbox();
    const seen: number[] = [];
    const signals: AbortSignal[] = [];
    sb.defineAsyncFunction("note", ([n], { signal }) => {
      seen.push(n as number);
      signals.push(signal);
      return new Promise(() => {}); // never answers: the eval's end cuts it off
    });
    for (let i = 0; i < 50; i++) {
      expect(await sb.eval(`note(${i}); ${i}`)).toBe(i);
      expect(seen).toEqual(Array.from({ length: i + 1 }, (_, k) => k));
      expect(signals[i]!.aborted).toBe(true);
    }
  });

  it("answers an eval that ended before dispose with its value, and a later one with DISPOSED", async () => {
    for (let i = 0; i < 50; i++) {
      const sb = new Sandbox();
      const first = outcome(sb.eval("1 + 1"));
      const second = outcome(sb.eval("2 + 2"));
      sb.dispose();
      const both = JSON.stringify([await first, await second]);
      // A later eval cannot have run if an earlier one was cut off by the dispose.
      expect([
        JSON.stringify([2, 4]),
        JSON.stringify([2, "DISPOSED"]),
        JSON.stringify(["DISPOSED", "DISPOSED"]),
      ]).toContain(both);
      expect(await outcome(sb.eval("3"))).toBe("DISPOSED");
    }
  });

  it("ignores an abort that comes after the eval ended, and never runs an eval whose signal was aborted first", async () => {
    const sb = sandbox();
    for (let i = 0; i < 50; i++) {
      const controller = new AbortController();
      const pending = outcome(sb.eval(`${i}`, { signal: controller.signal }));
      controller.abort();
      expect([i, "ABORTED"]).toContain(await pending);
      expect(await outcome(sb.eval("globalThis.ran = true; 'ran'", { signal: AbortSignal.abort() }))).toBe("ABORTED");
      expect(sb.evalSync("typeof ran")).toBe("undefined");
    }
  });

  it("lets a timer fire during a loop of awaited short evals", async () => {
    const sb = sandbox();
    let fired = false;
    setTimeout(() => (fired = true), 1);
    let evals = 0;
    // Answered at once every time, the loop would never yield to the timer.
    while (!fired && evals < 200_000) {
      expect(await sb.eval("1 + 1")).toBe(2);
      evals++;
    }
    expect(fired).toBe(true);
  });

  it("keeps a value answered at once intact while another sandbox's eval runs between its decode slices", async () => {
    const sb = sandbox();
    const other = sandbox();
    for (let i = 0; i < 20; i++) {
      // Several decode slices (a turn of the loop between them), and small enough to come back
      // through the exchange buffer that every sandbox's evals and host calls share.
      const pending = sb.eval("Array.from({ length: 1500 }, (_, i) => ({ a: i, b: 'x' }))");
      setImmediate(() => other.evalSync("Array.from({ length: 1500 }, (_, i) => ({ c: -i, d: 'y' }))"));
      const value = (await pending) as Array<{ a: number; b: string }>;
      expect(value).toEqual(Array.from({ length: 1500 }, (_, i) => ({ a: i, b: "x" })));
    }
  });

  it("keeps call order when the turn's 1 ms of answers at once runs out between two evals", async () => {
    const sb = sandbox();
    sb.evalSync("globalThis.order = []");
    for (let round = 0; round < 20; round++) {
      const first = sb.eval(`order.push(${round}); ${round}`);
      const spentAt = performance.now();
      while (performance.now() - spentAt < 2) {
        // the turn's time for answers at once runs out: the next eval waits for a turn of the loop
      }
      const later = [sb.eval(`order.push(${100 + round}); "second"`), sb.eval(`order.push(${200 + round}); "third"`)];
      expect(() => sb.evalSync("0")).toThrow(expect.objectContaining({ code: "BUSY" }));
      expect(await Promise.all([first, ...later])).toEqual([round, "second", "third"]);
    }
    expect(sb.evalSync("order")).toEqual(Array.from({ length: 20 }, (_, i) => [i, 100 + i, 200 + i]).flat());
  });
});
