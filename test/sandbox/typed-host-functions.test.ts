// Host functions typed by an arguments schema (any Standard Schema; zod here): `fn` receives the
// parsed arguments, and a call the schema rejects never reaches it.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { sandbox } from "../hostile/harness.js";

describe("defineFunction with an arguments schema", () => {
  it("passes the parsed, typed arguments", () => {
    const sb = sandbox();
    sb.defineFunction("add", z.tuple([z.number(), z.number()]), (a, b) => a + b);
    expect(sb.evalSync("add(2, 3)")).toBe(5);
  });

  it("rejects arguments the schema refuses with a guest TypeError naming the issue, without calling fn", () => {
    const sb = sandbox();
    let calls = 0;
    sb.defineFunction("add", z.tuple([z.number(), z.number()]), (a, b) => {
      calls++;
      return a + b;
    });
    expect(sb.evalSync("try { add(2, '3') } catch (e) { [e.name, e.message] }")).toEqual([
      "TypeError",
      "invalid arguments to add(): 1: Invalid input: expected number, received string",
    ]);
    expect(calls).toBe(0);
  });

  it("refuses an asynchronous schema for a synchronous function", () => {
    const sb = sandbox();
    sb.defineFunction("f", z.tuple([z.string().refine(async () => true)]), (s) => s);
    expect(sb.evalSync("try { f('x') } catch (e) { e.message }")).toContain("asynchronous");
  });
});

describe("defineAsyncFunction with an arguments schema", () => {
  it("passes the parsed arguments and rejects the guest promise on bad ones", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("lookup", z.tuple([z.object({ id: z.number() })]), async ([{ id }]) => `user ${id}`);
    expect(await sb.eval("await lookup({ id: 7 })")).toBe("user 7");
    expect(await sb.eval("await lookup({ id: 'x' }).catch((e) => e.message)")).toBe(
      "invalid arguments to lookup(): 0.id: Invalid input: expected number, received string",
    );
  });
});
