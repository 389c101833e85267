// The JS <-> native boundary is declared once (native/boundary.h) and read by src/native.ts from
// the addon's frozen `contract`: the copy limits the native decoder applies are the ones the host
// encoder checks, and a direct call's failure crosses as { code, message } with its real cause.
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox, type SandboxError } from "../../src/index.js";
import { decodeValue, encodeValue } from "../../src/marshal.js";
import {
  COPY_LIMITS,
  JobKind,
  type NativeDispatcher,
  type NativeHandle,
  type NativeOutcomeSlots,
  type NativePrimitiveDispatcher,
  NativeSnapshotStatus,
  NativeStatus,
  NativeStop,
  StatsSlot,
  native,
  outcomeOf,
} from "../../src/native.js";
import { createHandle, requestEval, requestSnapshot, type HandleOptions } from "../../src/request.js";

const HANDLE_OPTIONS: HandleOptions = {
  memoryLimitBytes: 64 << 20,
  maxStackSizeBytes: 1 << 20,
  captureConsole: false,
  maxConsoleBytes: 0,
  copyLimitBytes: 64 << 20,
  maxHostCallsInFlight: 10_000,
};

const gc = (globalThis as { gc?: () => void }).gc;

const sandboxes: Sandbox[] = [];
function sandbox(): Sandbox {
  const sb = new Sandbox();
  sandboxes.push(sb);
  return sb;
}
afterEach(() => {
  for (const sb of sandboxes.splice(0)) sb.dispose();
});

function thrown(fn: () => unknown): SandboxError {
  try {
    fn();
  } catch (err) {
    return err as SandboxError;
  }
  throw new Error("expected a throw");
}

describe("the boundary table", () => {
  it("is exported by the addon frozen, and the TypeScript constants are its numbers", () => {
    expect(Object.isFrozen(native.contract)).toBe(true);
    expect(Object.isFrozen(native.contract.evalStatus)).toBe(true);
    expect(NativeStatus.CopyLimit).toBe(native.contract.evalStatus.CopyLimit);
    expect(COPY_LIMITS.maxNodes).toBe(native.contract.copyLimits.maxNodes);
  });
});

describe("a setGlobal over the part cap", () => {
  const tooMany = COPY_LIMITS.maxNodes + 100_000; // the 2.1M-element array

  it("is refused by the host encoder as UNSERIALIZABLE naming the part cap, not OUT_OF_MEMORY", () => {
    const err = thrown(() => sandbox().setGlobal("big", new Array(tooMany).fill(1)));
    expect(err.code).toBe("UNSERIALIZABLE");
    expect(err.message).toContain(`more than ${COPY_LIMITS.maxNodes} parts`);
  });

  it("is refused by the native decoder with a typed code when bytes get past the encoder", () => {
    const bytes = encodeValue(new Array(tooMany).fill(1), { ...COPY_LIMITS, maxNodes: tooMany + 1 });
    const handle = createHandle(
      HANDLE_OPTIONS,
      () => undefined,
      () => undefined,
    );
    try {
      expect(handle.setGlobal("big", bytes)).toEqual({
        code: "UNSERIALIZABLE",
        message: "the value has too many parts",
      });
      expect(handle.setGlobal("small", encodeValue([1, 2, 3]))).toBeUndefined();
    } finally {
      handle.dispose();
    }
  });
});

describe("a stop names one async eval", () => {
  const lastAsyncId = 7;
  let h!: NativeHandle;
  // Out here, not inline: the handle holds its dispatchers weakly, and a GC during the await below
  // would collect closures nothing else references (poke() would then fail in the guest).
  const pokeAndAnswer: NativeDispatcher = () => {
    h.stop(NativeStop.Abort, lastAsyncId); // late: that eval has ended
    return Buffer.from(encodeValue(undefined));
  };
  const pokePrimitive: NativePrimitiveDispatcher = () => {
    h.stop(NativeStop.Abort, lastAsyncId);
    return undefined;
  };

  it("never stops a later evalSync, even one whose host function sends a stop with the last async eval's id", async () => {
    h = createHandle(HANDLE_OPTIONS, pokeAndAnswer, pokePrimitive);
    try {
      expect(h.defineFunction("poke", 1, false)).toBeUndefined();
      requestEval(JobKind.Eval, h.id, lastAsyncId, 1000, {}, false);
      const outcome = (await h.start("1", "<async>")) as NativeOutcomeSlots;
      expect(outcomeOf(outcome).status).toBe(NativeStatus.Ok);
      gc?.(); // as one may land here on a loaded machine
      requestEval(JobKind.Eval, h.id, 0, 1000, {}, false);
      native.evalSync("poke({}); poke(); let n = 0; for (let i = 0; i < 1e5; i++) n += i; n", "<sync>");
      expect(native.syncStats[StatsSlot.status]).toBe(NativeStatus.Ok);
      expect(decodeValue(native.exchange.subarray(0, native.syncStats[StatsSlot.valueLength]))).toBe(4999950000);
    } finally {
      h.dispose();
    }
  });
});

describe("a job's outcome", () => {
  it("is read by slot name, a snapshot job's result typed by the job's kind", async () => {
    const writer = createHandle(
      HANDLE_OPTIONS,
      () => undefined,
      () => undefined,
    );
    const reader = createHandle(
      HANDLE_OPTIONS,
      () => undefined,
      () => undefined,
    );
    try {
      requestEval(JobKind.Eval, writer.id, 1, 1000, {}, false);
      const evaluated = outcomeOf((await writer.start("var kept = [1, 2]; 'done'", "<eval>")) as NativeOutcomeSlots);
      expect(evaluated.status).toBe(NativeStatus.Ok);
      expect(decodeValue(evaluated.value!)).toBe("done");
      expect(evaluated.written).toBeUndefined();
      expect(evaluated.read).toBeUndefined();

      requestSnapshot(JobKind.WriteSnapshot, 2, 0, 1 << 20);
      const written = outcomeOf((await writer.start([])) as NativeOutcomeSlots);
      expect(written.read).toBeUndefined();
      expect(written.written?.status).toBe(NativeSnapshotStatus.Ok);
      const body = written.written?.body;
      expect(body).toBeInstanceOf(Buffer);

      requestSnapshot(JobKind.ReadSnapshot, 1, 1000, 0);
      const read = outcomeOf((await reader.start(body!)) as NativeOutcomeSlots);
      expect(read.written).toBeUndefined();
      expect(read.read).toEqual({ status: NativeSnapshotStatus.Ok, notRestored: [] });
      requestEval(JobKind.Eval, reader.id, 0, 1000, {}, false);
      native.evalSync("kept.length", "<eval>");
      expect(decodeValue(native.exchange.subarray(0, native.syncStats[StatsSlot.valueLength]))).toBe(2);
    } finally {
      writer.dispose();
      reader.dispose();
    }
  });
});
