/**
 * The process tier's handle: the surface src/sandbox.ts uses ({@link NativeHandle}), served by a
 * sandbox whose engine lives in a helper process ({@link HelperProcess}). Every call becomes a
 * frame; direct calls wait for their reply on the calling thread (as the in-process handle runs
 * them there), async jobs settle when their outcome frame arrives. The tier is a transport: the
 * request slots src/request.ts wrote are read here and sent as they are, and outcomes come back
 * in the shape the in-process handle gives them.
 */
import {
  CallSlot,
  ChannelFrame,
  DispatchKind,
  isNativeError,
  JobKind,
  native,
  NativeStatus,
  OutcomeSlot,
  RequestSlot,
  type NativeDispatcher,
  type NativeError,
  type NativeHandle,
  type NativeOutcome,
  type NativeOutcomeSlots,
  type NativeSnapshotSlots,
} from "../native.js";
import { type FrameReader, FrameWriter, ProtocolError } from "./frames.js";
import type { HelperProcess } from "./helper-process.js";
import { replyGraceMs } from "./pool.js";
import { stubOutcome } from "../outcomes.js";
import type { SourceCode } from "../types.js";

const EMPTY = Buffer.alloc(0);
const KNOWN_STATUSES = new Set(Object.values(NativeStatus));
// The numbers src/request.ts wrote for a handle call (QJSN_CALL_SLOTS), read here as the addon reads them.
const calls = native.callSlots;

type HostAnswer = number | Buffer | [string, string];

/** The outcome of an eval as a helper wrote it (native/helper/helper.cc writeOutcome). */
export function readOutcome(r: FrameReader): NativeOutcome & { evalId: number; kind: number } {
  const status = r.u32();
  if (!KNOWN_STATUSES.has(status)) throw new ProtocolError(`unknown eval status ${status}`);
  const value = r.bytes();
  const message = r.string();
  const stop = r.u32();
  const console = r.bytes();
  const outcome = {
    status,
    value: value.length > 0 ? value : undefined,
    message,
    stop,
    console: console.length > 0 ? console : undefined,
    consoleTruncated: r.u8() !== 0,
    executionMs: r.f64(),
    hostCalls: r.u32(),
    memoryUsedBytes: r.f64(),
    peakMemoryBytes: r.f64(),
    evalId: r.f64(),
    kind: r.u32(),
  };
  if (r.u8() === 0) return outcome;
  const snapshotStatus = r.u32();
  const snapshotMessage = r.string();
  const body = r.bytes();
  const count = r.u32();
  const notRestored: string[] = [];
  for (let i = 0; i < count; i++) notRestored.push(r.string(), r.string());
  const result = {
    status: snapshotStatus,
    notRestored,
    ...(snapshotStatus === 0 ? { body } : { message: snapshotMessage }),
  };
  if (outcome.kind === JobKind.ReadSnapshot) return { ...outcome, read: result };
  return { ...outcome, written: result };
}

/** An outcome as the array the in-process handle resolves a job with (read back by outcomeOf). */
function slotsOf(o: NativeOutcome & { kind: number }): NativeOutcomeSlots {
  const slots: unknown[] = [];
  slots[OutcomeSlot.status] = o.status;
  slots[OutcomeSlot.value] = o.value;
  slots[OutcomeSlot.message] = o.message;
  slots[OutcomeSlot.stop] = o.stop;
  slots[OutcomeSlot.console] = o.console;
  slots[OutcomeSlot.consoleTruncated] = o.consoleTruncated;
  slots[OutcomeSlot.executionMs] = o.executionMs;
  slots[OutcomeSlot.hostCalls] = o.hostCalls;
  slots[OutcomeSlot.memoryUsedBytes] = o.memoryUsedBytes;
  slots[OutcomeSlot.peakMemoryBytes] = o.peakMemoryBytes;
  slots[OutcomeSlot.kind] = o.kind;
  const snapshot = o.written ?? o.read;
  slots[OutcomeSlot.snapshot] =
    snapshot === undefined ? undefined : [snapshot.status, o.written?.body ?? snapshot.message, snapshot.notRestored];
  return slots;
}

/** An outcome that never reached the helper's engine. */
export function lostOutcome(status: NativeStatus, message: string): NativeOutcome {
  return { ...stubOutcome(status), message };
}

/** Writes the request in the shared request slots (src/request.ts) and its payloads. */
function writeRequest(w: FrameWriter, code: SourceCode, filename: string, excluded: string[], body: Uint8Array): void {
  const r = native.request;
  w.u32(r[RequestSlot.kind]!)
    .f64(r[RequestSlot.evalId]!)
    .f64(r[RequestSlot.budgetMs]!)
    .u8(r[RequestSlot.describe]!)
    .u8(r[RequestSlot.streamConsole]!)
    .u32(r[RequestSlot.resultParts]!)
    .u32(r[RequestSlot.thrownParts]!)
    .u32(r[RequestSlot.displayDepth]!)
    .f64(r[RequestSlot.snapshotMaxBytes]!);
  if (typeof code === "string") w.string(code);
  else w.bytes(code); // UTF-8 already: the same length-prefixed bytes
  w.string(filename).u32(excluded.length);
  for (const name of excluded) w.string(name);
  w.bytes(body);
}

function writeAnswer(w: FrameWriter, answer: HostAnswer | undefined): Buffer {
  if (typeof answer === "number") return w.u8(1).bytes(native.exchange.subarray(0, answer)).done();
  if (Buffer.isBuffer(answer) || answer instanceof Uint8Array) return w.u8(1).bytes(answer).done();
  const [name, message] = Array.isArray(answer) ? answer : ["Error", "host function failed"];
  return w.u8(0).string(String(name)).string(String(message)).done();
}

export class RemoteHandle implements NativeHandle {
  readonly id: number;
  readonly #helper: HelperProcess;
  readonly #dispatch: NativeDispatcher;
  #disposed = false;
  // An evalSync is in progress (its host functions run now): the helper's engine is busy with it.
  #inEvalSync = false;
  // The async job in flight: its evalId and how to settle it.
  #job: { evalId: number; resolve: (slots: NativeOutcomeSlots) => void } | undefined;

  // The largest reply body the sandbox's declared caps allow, besides a snapshot's body.
  readonly #replyBytes: number;

  constructor(helper: HelperProcess, id: number, dispatch: NativeDispatcher, replyBytes: number) {
    this.#helper = helper;
    this.id = id;
    this.#dispatch = dispatch;
    this.#replyBytes = replyBytes;
  }

  // Writes the request in the request slots; the helper may answer with the snapshot it caps.
  #request(w: FrameWriter, code: SourceCode, filename: string, excluded: string[], body: Uint8Array): void {
    this.#helper.expect(this.#replyBytes + native.request[RequestSlot.snapshotMaxBytes]!);
    writeRequest(w, code, filename, excluded, body);
  }

  /** True once the helper died: every call fails with `WORKER_LOST`. */
  get lost(): boolean {
    return this.#helper.lost;
  }

  /** The helper's process id. */
  get processId(): number {
    return this.#helper.pid;
  }

  #lostError(): NativeError {
    return { code: "WORKER_LOST", message: this.#helper.lostMessage() };
  }

  #frame(frame: number, sizeHint?: number): FrameWriter {
    return new FrameWriter(frame, this.id, sizeHint);
  }

  // A direct call: its reply, or a NativeError (lost, disposed).
  #call(frame: Buffer, timeoutMs = replyGraceMs()): FrameReader | NativeError {
    if (this.#disposed) return { code: "DISPOSED", message: "the sandbox is disposed" };
    const reply = this.#helper.call(frame, timeoutMs);
    return reply ?? this.#lostError();
  }

  // A reply of the error-or-nothing shape: u8 ok, [string code, string message].
  #errorReply(reply: FrameReader | NativeError): NativeError | undefined {
    if (isNativeError(reply)) return reply;
    return this.#helper.guard(() => {
      if (reply.u8() === 1) return undefined;
      return { code: reply.string(), message: reply.string() } as NativeError;
    });
  }

  /** Runs the Eval request in the request slots in the helper, answering its sync host calls meanwhile. */
  evalSync(code: SourceCode, filename: string): NativeOutcome {
    if (this.#inEvalSync) return lostOutcome(NativeStatus.Busy, "");
    this.#inEvalSync = true;
    try {
      return this.#evalSync(code, filename);
    } finally {
      this.#inEvalSync = false;
    }
  }

  #evalSync(code: SourceCode, filename: string): NativeOutcome {
    const w = this.#frame(ChannelFrame.EvalSync, code.length + 64);
    this.#request(w, code, filename, [], new Uint8Array(0));
    const timeoutMs = native.request[RequestSlot.budgetMs]! + replyGraceMs();
    let next = this.#call(w.done(), timeoutMs);
    while (true) {
      if (isNativeError(next))
        return lostOutcome(next.code === "DISPOSED" ? NativeStatus.Disposed : NativeStatus.WorkerLost, next.message);
      const reply = next;
      const answer = this.#helper.guard(() => {
        if (reply.frame === ChannelFrame.Reply) return { outcome: readOutcome(reply) };
        if (reply.frame !== ChannelFrame.SyncCall) throw new ProtocolError("unexpected direct frame");
        const fnId = reply.u32();
        const token = reply.u32();
        const args = reply.bytes();
        const result = this.#dispatch(DispatchKind.SyncCall, fnId, 0, 0, Buffer.from(args), 0) as
          | HostAnswer
          | undefined;
        return { token, result };
      });
      if ("outcome" in answer && answer.outcome !== undefined) return answer.outcome;
      if (!("token" in answer)) continue;
      next = this.#call(writeAnswer(this.#frame(ChannelFrame.AnswerSync).u32(answer.token), answer.result), timeoutMs);
    }
  }

  start(...args: unknown[]): Promise<NativeOutcomeSlots> | NativeError {
    if (this.#disposed) return { code: "DISPOSED", message: "the sandbox is disposed" };
    if (this.#helper.lost) return this.#lostError();
    if (this.#job) return { code: "BUSY", message: "an eval is running in this sandbox" };
    const kind = native.request[RequestSlot.kind]!;
    const evalId = native.request[RequestSlot.evalId]!;
    const w = this.#frame(ChannelFrame.Start, 128);
    if (kind === JobKind.Eval || kind === JobKind.EvalThenSnapshot)
      this.#request(
        w,
        args[0] as SourceCode,
        String(args[1]),
        (args[2] as string[] | undefined) ?? [],
        new Uint8Array(0),
      );
    else if (kind === JobKind.WriteSnapshot) this.#request(w, "", "", args[0] as string[], new Uint8Array(0));
    else this.#request(w, "", "", [], args[0] as Uint8Array);
    const promise = new Promise<NativeOutcomeSlots>((resolve) => {
      this.#job = { evalId, resolve };
    });
    this.#helper.jobStarted();
    this.#helper.send(w.done());
    return promise;
  }

  stop(): void {
    const reason = calls[CallSlot.reason]!;
    const evalId = calls[CallSlot.evalId]!;
    if (this.#job?.evalId !== evalId) return;
    this.#helper.send(this.#frame(ChannelFrame.Stop).u32(reason).f64(evalId).done());
  }

  settle(result: HostAnswer | null): void {
    const callId = calls[CallSlot.callId]!;
    const ok = calls[CallSlot.ok] === 1;
    // null: what appendResult sent, a result of megabytes handed over in pieces, which the helper
    // gathered; the Settle's empty bytes stand for them.
    if (result === null) result = EMPTY;
    const w = this.#frame(ChannelFrame.Settle).u32(callId);
    this.#helper.send(writeAnswer(w, ok ? result : Array.isArray(result) ? result : undefined));
  }

  appendResult(piece: Uint8Array): void {
    const w = this.#frame(ChannelFrame.AppendResult, piece.length + 8).u32(calls[CallSlot.callId]!);
    this.#helper.send(w.bytes(piece).done());
  }

  answerSync(result: HostAnswer): void {
    this.#answerSync(calls[CallSlot.callId]!, result);
  }

  #answerSync(token: number, result: HostAnswer): void {
    this.#helper.send(writeAnswer(this.#frame(ChannelFrame.AnswerSync).u32(token), result));
  }

  defineFunction(path: string): NativeError | undefined {
    const w = this.#frame(ChannelFrame.DefineFunction)
      .string(path)
      .u32(calls[CallSlot.fnId]!)
      .u8(calls[CallSlot.async]!);
    return this.#errorReply(this.#call(w.done()));
  }

  defineFrozenFunction(name: string): boolean | NativeError {
    const reply = this.#call(this.#frame(ChannelFrame.DefineFrozen).string(name).u32(calls[CallSlot.fnId]!).done());
    const error = this.#errorReply(reply);
    if (error) return error;
    return this.#helper.guard(() => (reply as FrameReader).u8() === 1);
  }

  setGlobal(name: string, bytes: Buffer): NativeError | undefined {
    return this.#errorReply(
      this.#call(
        this.#frame(ChannelFrame.SetGlobal, bytes.length + 64)
          .string(name)
          .bytes(bytes)
          .done(),
      ),
    );
  }

  getGlobal(name: string): Buffer | NativeError {
    const reply = this.#call(this.#frame(ChannelFrame.GetGlobal).string(name).done());
    const error = this.#errorReply(reply);
    if (error) return error;
    return this.#helper.guard(() => Buffer.from((reply as FrameReader).bytes()));
  }

  globalNames(): string[] | NativeError {
    const limit = calls[CallSlot.limit]!;
    const reply = this.#call(this.#frame(ChannelFrame.GlobalNames).u32(limit).done());
    const error = this.#errorReply(reply);
    if (error) return error;
    return this.#helper.guard(() => {
      const count = (reply as FrameReader).u32();
      if (count > limit) throw new ProtocolError("more global names than asked for");
      const names: string[] = [];
      for (let i = 0; i < count; i++) names.push((reply as FrameReader).string());
      return names;
    });
  }

  memoryUsage(): [used: number, peak: number, limit: number] {
    const reply = this.#call(this.#frame(ChannelFrame.MemoryUsage).done());
    if (isNativeError(reply)) return [0, 0, 0];
    return this.#helper.guard(() => [reply.f64(), reply.f64(), reply.f64()] as [number, number, number]);
  }

  #okReply(reply: FrameReader | NativeError, what: string): NativeError | undefined {
    if (isNativeError(reply)) return reply;
    return this.#helper.guard(
      () => (reply.u8() === 1 ? undefined : { code: "INVALID_ARGUMENT", message: what }) as NativeError | undefined,
    );
  }

  setClock(): NativeError | undefined {
    const w = this.#frame(ChannelFrame.SetClock)
      .u8(calls[CallSlot.clockFixed]!)
      .f64(calls[CallSlot.epochMs]!)
      .u8(calls[CallSlot.localTimeUtc]!);
    return this.#okReply(this.#call(w.done()), "the clock's time is outside the Date range");
  }

  setRandomSeed(): NativeError | undefined {
    return this.#okReply(
      this.#call(this.#frame(ChannelFrame.SetRandomSeed).f64(calls[CallSlot.seed]!).done()),
      "the seed is not an integer below 2**53",
    );
  }

  // A snapshot write or read in the request slots, run by the helper as the in-process tier runs it
  // on the calling thread: [status, body | message, flat notRestored].
  #snapshotDirect(excluded: string[], body: Uint8Array): NativeSnapshotSlots | NativeError {
    if (this.#inEvalSync) return { code: "BUSY", message: "an eval is running in this sandbox" };
    const w = this.#frame(ChannelFrame.EvalSync, body.length + 64);
    this.#request(w, "", "", excluded, body);
    const reply = this.#call(w.done(), native.request[RequestSlot.budgetMs]! + replyGraceMs());
    if (isNativeError(reply)) return reply;
    const outcome = this.#helper.guard(() => {
      if (reply.frame !== ChannelFrame.Reply) throw new ProtocolError("unexpected direct frame");
      return readOutcome(reply);
    });
    const result = outcome.written ?? outcome.read;
    if (result === undefined)
      return { code: "WORKER_LOST", message: "the helper answered a snapshot request without one" };
    return [result.status, outcome.written?.body ?? result.message, result.notRestored];
  }

  writeSnapshot(excludedNames: string[]): NativeSnapshotSlots | NativeError {
    return this.#snapshotDirect(excludedNames, new Uint8Array(0));
  }

  readSnapshot(body: Uint8Array): NativeSnapshotSlots | NativeError {
    return this.#snapshotDirect([], body);
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#settleJob(lostOutcome(NativeStatus.Disposed, ""), 0);
    this.#helper.release(this);
  }

  #settleJob(outcome: NativeOutcome & { kind?: number }, evalId: number | undefined): void {
    const job = this.#job;
    if (!job || (evalId !== undefined && evalId !== 0 && job.evalId !== evalId)) return;
    this.#job = undefined;
    this.#helper.jobEnded();
    job.resolve(slotsOf({ ...outcome, kind: outcome.kind ?? JobKind.Eval }));
  }

  /** A frame of this sandbox that answers no direct call (the helper read loop's dispatch). */
  onEvent(r: FrameReader): void {
    switch (r.frame) {
      case ChannelFrame.EvalDone: {
        const outcome = readOutcome(r);
        this.#settleJob(outcome, outcome.evalId);
        return;
      }
      case ChannelFrame.AsyncCall: {
        const evalId = r.f64();
        const callId = r.u32();
        const fnId = r.u32();
        const args = Buffer.from(r.bytes());
        if (this.#job?.evalId === evalId) this.#dispatch(DispatchKind.AsyncCall, fnId, callId, 0, args, evalId);
        return;
      }
      case ChannelFrame.Console: {
        const evalId = r.f64();
        const level = r.u32();
        const args = Buffer.from(r.bytes());
        if (this.#job?.evalId === evalId) this.#dispatch(DispatchKind.Console, level, 0, 0, args, evalId);
        return;
      }
      case ChannelFrame.SyncCall: {
        const fnId = r.u32();
        const token = r.u32();
        const args = Buffer.from(r.bytes());
        if (token === 0) throw new ProtocolError("a parked sync call needs a token");
        const answer = this.#dispatch(DispatchKind.SyncCall, fnId, token, 0, args, 0) as HostAnswer | undefined;
        if (answer !== undefined) this.#answerSync(token, answer);
        return;
      }
      default:
        throw new ProtocolError(`unexpected frame ${r.frame}`);
    }
  }

  /**
   * Sends a test-only request (1: a null dereference, 2: an `open()`, 3: `abort()`). Only helpers
   * built with QJSN_TEST_HOOKS (`npm run build:native:test-helper`, build/test-hooks/) know it; a
   * release helper takes it for a malformed frame and exits. For tests of the confinement.
   */
  testHook(what: number): void {
    this.#helper.send(this.#frame(ChannelFrame.TestHook).u32(what).done());
  }

  /** The helper died: the job in flight fails with `WORKER_LOST`. */
  onLost(message: string): void {
    this.#settleJob(lostOutcome(NativeStatus.WorkerLost, message), undefined);
  }
}
