/**
 * One helper process of the process tier (native/helper/, next to the addon): spawning it, the
 * sandboxes it hosts, the dispatch of what it sends, and its loss. Policy lives here; the addon
 * only spawns, moves frames and reaps. Which helper a sandbox goes to: src/process-tier/pool.ts.
 */
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import { SandboxError } from "../errors.js";
import {
  addonDirectory,
  ChannelFrame,
  CHANNEL_SIZES,
  type HelperLoss,
  isNativeError,
  native,
  type NativeDispatcher,
  type NativeHelperChannel,
} from "../native.js";
import type { HandleOptions } from "../request.js";
import { FrameReader, FrameWriter, ProtocolError } from "./frames.js";
import { replyGraceMs } from "./pool.js";
import { RemoteHandle } from "./remote-handle.js";

/** Address space a helper needs besides its sandboxes' heaps: executor thread stacks, code, malloc arenas. */
const HELPER_BASE_ADDRESS_SPACE = 2 * 1024 ** 3;
/** The exit code of a helper that could not confine itself (native/helper/helper.cc). */
const EXIT_NOT_CONFINED = 70;
/** The exit code of a helper built from other sources than the addon (its frames differ). */
const EXIT_OTHER_BUILD = 71;
/** The frames the addon was built with, in order, as the helper checks them ("Create,Dispose,...,"). */
const FRAME_NAMES = Object.entries(ChannelFrame)
  .sort((a, b) => a[1] - b[1])
  .map(([name]) => `${name},`)
  .join("");

/** Room in a frame besides the payloads a sandbox's caps bound: fields, error messages, names not restored. */
const FRAME_SLACK_BYTES = 1024 ** 2;

const signalNames = new Map(Object.entries(osConstants.signals).map(([name, number]) => [number, name]));

/** Where the helper executable is: next to the addon, or where QUICKJS_NATIVE_HELPER says. */
export function helperPath(): string {
  const override = process.env.QUICKJS_NATIVE_HELPER;
  if (override) return override;
  return join(addonDirectory, process.platform === "win32" ? "quickjs-native-helper.exe" : "quickjs-native-helper");
}

/** One helper process and the sandboxes it hosts. */
export class HelperProcess {
  /** The partition whose sandboxes it hosts; undefined while it waits warm in the pool for its first. */
  partition: string | undefined;
  readonly memoryPerSandbox: number;
  /** Whether it was asked to confine itself (it exits before serving when it cannot). */
  readonly confined: boolean;
  /** The executable it runs. */
  readonly path: string;
  readonly #onEmptied: (helper: HelperProcess) => void;
  readonly #onLost: (helper: HelperProcess) => void;
  readonly #channel: NativeHelperChannel;
  readonly #handles = new Map<number, RemoteHandle>();
  #nextId = 0;
  #jobs = 0;
  #lost: HelperLoss | undefined;
  #killedForProtocol = false;
  #served = false; // it answered a Create: it confined itself, if asked to
  // The largest frame body the parent expects from this helper, raised as its sandboxes declare more.
  #frameLimit = 0;

  constructor(
    memoryPerSandbox: number,
    sandboxesPerProcess: number,
    confined: boolean,
    onEmptied: (helper: HelperProcess) => void,
    onLost: (helper: HelperProcess) => void,
  ) {
    this.memoryPerSandbox = memoryPerSandbox;
    this.confined = confined;
    this.path = helperPath();
    this.#onEmptied = onEmptied;
    this.#onLost = onLost;
    const Channel = native.HelperChannel;
    if (Channel === undefined)
      throw new SandboxError("INVALID_ARGUMENT", `isolation: "process" is not available on ${process.platform} yet`);
    const addressSpace = HELPER_BASE_ADDRESS_SPACE + sandboxesPerProcess * memoryPerSandbox;
    try {
      this.#channel = new Channel(
        this.path,
        [String(addressSpace), confined ? "confined" : "unconfined", FRAME_NAMES],
        (frames, lost) => this.#onEvents(frames, lost),
      );
      this.expect(0); // until a sandbox declares its caps, no frame of more than the slack is expected
    } catch (err) {
      throw new SandboxError("INVALID_ARGUMENT", isNativeError(err) ? err.message : "cannot start the helper process", {
        cause: err,
      });
    }
  }

  get pid(): number {
    return this.#channel.pid;
  }

  /**
   * True once the helper is gone: killed for breaking the protocol (before it is reaped, so the
   * call that found the breach already sees its sandboxes broken), or reaped by the addon, whether
   * or not its events reached the loop yet.
   */
  get lost(): boolean {
    return this.#killedForProtocol || this.#lost !== undefined || this.#channel.ended() !== undefined;
  }

  get size(): number {
    return this.#handles.size;
  }

  /**
   * True once a confined helper is gone because it could not confine itself: it exited with that
   * code before it ever served (a helper that served may have run guest code, and its exit code
   * proves nothing).
   */
  get couldNotConfine(): boolean {
    const lost = this.#lost ?? this.#channel.ended();
    return this.confined && !this.#served && lost !== undefined && lost[0] === 0 && lost[1] === EXIT_NOT_CONFINED;
  }

  /** How the helper ended, in words. */
  lostMessage(): string {
    if (this.#killedForProtocol) return "the sandbox's helper process sent a malformed frame and was killed";
    const lost = this.#lost ?? this.#channel.ended();
    if (!lost) return "the sandbox's helper process is gone";
    const [signal, code, overLimit] = lost;
    if (overLimit)
      return `the sandbox's helper process announced a frame larger than its sandboxes' caps allow (${this.#frameLimit} bytes) and was killed`;
    if (signal !== 0) return `the sandbox's helper process died (${signalNames.get(signal) ?? `signal ${signal}`})`;
    if (code === EXIT_NOT_CONFINED) return "the sandbox's helper process could not confine itself";
    if (code === EXIT_OTHER_BUILD)
      return "the sandbox's helper process was built from other sources than the addon: rebuild both (npm run build:native)";
    return `the sandbox's helper process exited (code ${code})`;
  }

  /** Runs `read` on a frame's fields; a frame that does not parse kills the helper and throws `WORKER_LOST`. */
  guard<T>(read: () => T): T {
    try {
      return read();
    } catch (err) {
      if (!(err instanceof ProtocolError || err instanceof RangeError)) throw err;
      this.#protocolViolation();
      throw new SandboxError("WORKER_LOST", "the sandbox's helper process sent a malformed frame and was killed");
    }
  }

  #protocolViolation(): void {
    this.#killedForProtocol = true;
    this.#channel.kill();
  }

  /**
   * The helper may now send frames with a body of `bytes` (payloads its sandboxes' declared caps
   * allow, plus slack): any larger one, announced before it arrives, kills it.
   */
  expect(bytes: number): void {
    const limit = Math.min(bytes + FRAME_SLACK_BYTES, CHANNEL_SIZES.maxFrameBytes);
    if (limit <= this.#frameLimit) return;
    this.#frameLimit = limit;
    this.#channel.setFrameLimit(limit);
  }

  call(frame: Buffer, timeoutMs: number): FrameReader | undefined {
    if (this.lost) return undefined;
    const reply = this.#channel.call(frame, timeoutMs);
    return reply === undefined ? undefined : this.guard(() => new FrameReader(reply));
  }

  send(frame: Buffer): void {
    if (!this.#lost) this.#channel.send(frame);
  }

  /** A sandbox in this helper with options `o`, or the typed error of its creation. */
  open(o: HandleOptions, dispatch: NativeDispatcher): RemoteHandle {
    const id = ++this.#nextId;
    const w = new FrameWriter(ChannelFrame.Create, id)
      .f64(o.memoryLimitBytes)
      .f64(o.maxStackSizeBytes)
      .f64(o.captureConsole ? 1 : 0)
      .f64(o.maxConsoleBytes)
      .f64(o.copyLimitBytes)
      .f64(o.maxHostCallsInFlight);
    // A reply carries a result and a thrown value (each within the copy limit) and the console.
    const replyBytes = 2 * o.copyLimitBytes + o.maxConsoleBytes;
    this.expect(replyBytes);
    const reply = this.call(w.done(), replyGraceMs());
    if (reply === undefined) throw new SandboxError("WORKER_LOST", this.lostMessage());
    const failed = this.guard(() => (reply.u8() === 1 ? undefined : { code: reply.string(), message: reply.string() }));
    this.#served = true;
    if (failed) throw Object.assign(new Error(failed.message), { code: failed.code });
    const handle = new RemoteHandle(this, id, dispatch, replyBytes);
    this.#handles.set(id, handle);
    return handle;
  }

  /** The sandbox is disposed: the helper frees it, and an emptied helper goes back to the pool. */
  release(handle: RemoteHandle): void {
    if (!this.#handles.delete(handle.id)) return;
    this.send(new FrameWriter(ChannelFrame.Dispose, handle.id).done());
    if (this.#handles.size === 0) this.#onEmptied(this);
  }

  // Async jobs in flight keep the event loop alive, as the in-process tier's do.
  jobStarted(): void {
    if (this.#jobs++ === 0) this.#channel.ref();
  }

  jobEnded(): void {
    if (--this.#jobs === 0) this.#channel.unref();
  }

  /** Ends the helper (an idle one the pool no longer keeps). */
  close(): void {
    this.#channel.kill();
  }

  #onEvents(frames: Buffer[], lost: HelperLoss | undefined): void {
    for (const frame of frames) {
      if (this.#killedForProtocol) break;
      try {
        const r = new FrameReader(frame);
        const handle = this.#handles.get(r.sandboxId);
        handle?.onEvent(r);
      } catch (err) {
        if (!(err instanceof ProtocolError || err instanceof RangeError)) throw err;
        this.#protocolViolation();
      }
    }
    if (lost === undefined) return;
    this.#lost = lost;
    this.#onLost(this);
    const message = this.lostMessage();
    for (const handle of this.#handles.values()) handle.onLost(message);
  }
}
