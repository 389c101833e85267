// Every direct native call fails with one shape, { code, message } (a NativeError), returned or
// thrown; src/outcomes.ts refusal() is the one place it becomes a SandboxError (issue 29 item 3).
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";
import { encodeValue } from "../../src/marshal.js";
import {
  isNativeError,
  JobKind,
  type NativeDispatcher,
  type NativeHandle,
  type NativePrimitiveDispatcher,
} from "../../src/native.js";
import { refusal } from "../../src/outcomes.js";
import { createHandle, type HandleOptions, requestEval, setGuestClock, setGuestRandomSeed } from "../../src/request.js";

const OPTIONS: HandleOptions = {
  memoryLimitBytes: 64 << 20,
  maxStackSizeBytes: 1 << 20,
  captureConsole: false,
  maxConsoleBytes: 0,
  copyLimitBytes: 64 << 20,
  maxHostCallsInFlight: 10_000,
};
// Held here: the addon holds a handle's dispatchers weakly.
const answerUndefined: NativeDispatcher = () => Buffer.from(encodeValue(undefined));
const noPrimitives: NativePrimitiveDispatcher = () => undefined;

const handles: NativeHandle[] = [];
const sandboxes: Sandbox[] = [];
function handle(): NativeHandle {
  const h = createHandle(OPTIONS, answerUndefined, noPrimitives);
  handles.push(h);
  return h;
}
afterEach(() => {
  for (const h of handles.splice(0)) h.dispose();
  for (const sb of sandboxes.splice(0)) sb.dispose();
});

function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
}

describe("the native constructor", () => {
  it("says so when it fails for a reason other than memory: bad arguments are INVALID_ARGUMENT", () => {
    const err = thrownBy(() => createHandle(OPTIONS, undefined as unknown as NativeDispatcher, noPrimitives));
    expect(isNativeError(err)).toBe(true);
    expect(err).toMatchObject({ code: "INVALID_ARGUMENT", message: "SandboxHandle: bad arguments" });
  });

  it("names the memory limit when the realm does not fit in it, as OUT_OF_MEMORY", () => {
    const err = thrownBy(() =>
      createHandle({ ...OPTIONS, memoryLimitBytes: 64 * 1024 }, answerUndefined, noPrimitives),
    );
    expect(err).toMatchObject({ code: "OUT_OF_MEMORY" });
    expect((err as Error).message).toContain("65536 bytes");
  });

  it("hands its NativeError to the one place that makes a SandboxError of it, code and cause kept", () => {
    const thrown = Object.assign(new Error("the calling thread has too little stack left to create a sandbox"), {
      code: "STACK_OVERFLOW",
    });
    const made = refusal(thrown, "create the sandbox", "could not create the sandbox");
    expect(made).toBeInstanceOf(SandboxError);
    expect(made).toMatchObject({ code: "STACK_OVERFLOW", message: thrown.message });
    const broken = refusal(new TypeError("not a native error"), "create the sandbox");
    expect(broken).toMatchObject({ code: "BROKEN", message: "could not create the sandbox" });
    expect(broken.cause).toBeInstanceOf(TypeError);
  });
});

describe("a direct call", () => {
  it("on a disposed handle throws DISPOSED as a NativeError, not a text prefix", () => {
    const h = createHandle(OPTIONS, answerUndefined, noPrimitives);
    h.dispose();
    const err = thrownBy(() => h.memoryUsage());
    expect(err).toMatchObject({ code: "DISPOSED", message: "the sandbox is disposed" });
  });

  it("getGlobal answers a NativeError, and Sandbox.getGlobal throws it as a typed SandboxError", async () => {
    const h = handle();
    requestEval(JobKind.Eval, h.id, 1, 1000, {}, false);
    await h.start("Object.defineProperty(globalThis, 'acc', { get() { return 1; } })", "<eval>");
    const answer = h.getGlobal("acc");
    expect(answer).toEqual({ code: "UNSERIALIZABLE", message: "global 'acc' is an accessor; getters are never run" });

    const sb = new Sandbox();
    sandboxes.push(sb);
    sb.evalSync("Object.defineProperty(globalThis, 'acc', { get() { return 1; } })");
    const err = thrownBy(() => sb.getGlobal("acc"));
    expect(err).toBeInstanceOf(SandboxError);
    expect(err).toMatchObject({
      code: "UNSERIALIZABLE",
      message: "global 'acc' is an accessor; getters are never run",
    });
  });

  it("answers BUSY, the one busy code, from start, getGlobal and setClock while a job is active", async () => {
    const h = handle();
    requestEval(JobKind.Eval, h.id, 1, 5000, {}, false);
    const first = h.start("let n = 0; for (let i = 0; i < 1e7; i++) n += i; n", "<eval>");
    expect(first).toBeInstanceOf(Promise);
    requestEval(JobKind.Eval, h.id, 2, 5000, {}, false);
    expect(h.start("1", "<eval>")).toMatchObject({ code: "BUSY" });
    expect(h.getGlobal("n")).toMatchObject({ code: "BUSY" });
    expect(setGuestClock(h, true, 0, true)).toMatchObject({ code: "BUSY" });
    expect(setGuestRandomSeed(h, 1)).toMatchObject({ code: "BUSY" });
    await first;
    expect(setGuestClock(h, true, 0, true)).toBeUndefined();
    expect(setGuestClock(h, true, 1e20, true)).toMatchObject({ code: "INVALID_ARGUMENT" });
  });
});
