// The JS <-> native boundary is declared once (native/boundary.h) and read by src/native.ts from
// the addon's frozen `contract`: the copy limits the native decoder applies are the ones the host
// encoder checks, and a direct call's failure crosses as { code, message } with its real cause.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
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
import {
  createHandle,
  defineHostFunction,
  type HandleOptions,
  requestEval,
  requestSnapshot,
  stopEval,
} from "../../src/request.js";

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

describe("a slot list out of step with the addon's", () => {
  const require = createRequire(import.meta.url);
  const addonPath: string =
    process.env.QUICKJS_NATIVE_BINARY ??
    (require("node-gyp-build") as { path(dir: string): string }).path(fileURLToPath(new URL("../..", import.meta.url)));

  /** Loads src/native.ts over the real addon with its contract's call slots replaced by `callSlot`. */
  async function loadWithCallSlots(callSlot: Record<string, number>): Promise<unknown> {
    const dir = mkdtempSync(join(tmpdir(), "qjsn-contract-"));
    const file = join(dir, "addon.cjs");
    writeFileSync(
      file,
      `const real = require(${JSON.stringify(addonPath)});
const contract = Object.freeze({ ...real.contract, callSlot: Object.freeze(${JSON.stringify(callSlot)}) });
module.exports = { ...real, contract };`,
    );
    const before = process.env.QUICKJS_NATIVE_BINARY;
    process.env.QUICKJS_NATIVE_BINARY = file;
    vi.resetModules();
    try {
      return await import("../../src/native.js");
    } finally {
      if (before === undefined) delete process.env.QUICKJS_NATIVE_BINARY;
      else process.env.QUICKJS_NATIVE_BINARY = before;
      vi.resetModules();
      rmSync(dir, { recursive: true });
    }
  }

  it("loads when the addon's call slots are the ones src/ writes", async () => {
    await expect(loadWithCallSlots({ ...native.contract.callSlot })).resolves.toHaveProperty("CallSlot");
  });

  it("fails the load check when the addon lacks a call slot src/ writes", async () => {
    const { seed: _dropped, ...fewer } = native.contract.callSlot;
    await expect(loadWithCallSlots(fewer)).rejects.toThrow("callSlot.seed");
  });

  it("fails the load check when the addon reads a call slot src/ never writes", async () => {
    const extra = { ...native.contract.callSlot, timeoutMs: Object.keys(native.contract.callSlot).length };
    await expect(loadWithCallSlots(extra)).rejects.toThrow('callSlot entry this side knows ("timeoutMs")');
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
    stopEval(h, NativeStop.Abort, lastAsyncId); // late: that eval has ended
    return Buffer.from(encodeValue(undefined));
  };
  const pokePrimitive: NativePrimitiveDispatcher = () => {
    stopEval(h, NativeStop.Abort, lastAsyncId);
    return undefined;
  };

  it("never stops a later evalSync, even one whose host function sends a stop with the last async eval's id", async () => {
    h = createHandle(HANDLE_OPTIONS, pokeAndAnswer, pokePrimitive);
    try {
      expect(defineHostFunction(h, "poke", 1, false)).toBeUndefined();
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
