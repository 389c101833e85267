/**
 * Decoding of what one sandbox sends to the host (eval results, host-call arguments, console
 * lines) without holding the Node main thread: a value is decoded in slices of
 * {@link DECODE_SLICE_WORK} units of work, with a turn of the event loop (`setImmediate`) between
 * slices. Values arrive in the order they were sent, each handed on only after every earlier one.
 * A value that fits in one slice, with nothing queued before it, is decoded and handed on before
 * `push` returns: the common case costs no extra turn of the event loop.
 */
import type { SandboxError } from "./errors.js";
import type { ResumableDecode } from "./marshal.js";

/**
 * Work units per slice (about half a millisecond of host time here; see src/decoder.ts for the
 * units): on a busy machine a thread that runs without pause is the one the OS preempts, so the
 * event loop's turns are kept short.
 */
export const DECODE_SLICE_WORK = 2048;

interface Pending {
  decode: ResumableDecode<unknown>;
  use(value: unknown): void;
  fail(error: SandboxError): void;
}

/** The decodes of one sandbox, in arrival order. */
export class DecodeQueue {
  readonly #pending: Pending[] = []; // the first is in progress
  readonly #drainWaiters: Array<() => void> = [];
  #scheduled = false;
  #cancelled: (() => SandboxError) | undefined;

  /** True while a decode is queued or in progress. */
  get busy(): boolean {
    return this.#pending.length > 0;
  }

  /**
   * Decodes after everything queued before, then calls `use` with the value or `fail` with a
   * `SandboxError` (once the queue is cancelled, with the cancellation's error). Returns true when
   * that already happened, before `push` returned. `use` and `fail` must not throw.
   */
  push<T>(decode: ResumableDecode<T>, use: (value: T) => void, fail: (error: SandboxError) => void): boolean {
    if (this.#cancelled) {
      fail(this.#cancelled());
      return true;
    }
    const pending = { decode, use, fail } as Pending;
    if (this.#pending.length === 0 && this.#advance(pending, DECODE_SLICE_WORK)) return true;
    this.#pending.push(pending);
    this.#schedule();
    return false;
  }

  /** Like {@link DecodeQueue.push}, as a promise of the value. */
  decode<T>(decode: ResumableDecode<T>): Promise<T> {
    return new Promise((resolve, reject) => this.push(decode, resolve, reject));
  }

  /**
   * Finishes every queued decode now, in order, on this turn: for a caller that must answer
   * before returning (a guest running on this thread waits for a synchronous host call).
   */
  flush(): void {
    while (this.#pending.length > 0) this.#advance(this.#pending[0]!, Infinity);
    this.#drained();
  }

  /** Resolves once every decode queued so far is done; undefined when none is queued. */
  drained(): Promise<void> | undefined {
    if (this.#pending.length === 0) return undefined;
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /**
   * Fails every queued decode, and every later one, with the error `reason` makes (the sandbox is
   * gone); made only when a decode fails with it, since an error captures a stack.
   */
  cancel(reason: () => SandboxError): void {
    this.#cancelled = reason;
    for (const pending of this.#pending.splice(0)) pending.fail(reason());
    this.#drained();
  }

  // Advances `pending` by up to `budget` units; when it is done (or failed), it leaves the queue
  // (if it was queued) before its callback runs, so the callback may push or flush. True when done.
  #advance(pending: Pending, budget: number): boolean {
    let done: boolean;
    try {
      done = pending.decode.advance(budget);
    } catch (err) {
      this.#dequeue(pending);
      pending.fail(err as SandboxError);
      return true;
    }
    if (!done) return false;
    this.#dequeue(pending);
    pending.use(pending.decode.value);
    return true;
  }

  #dequeue(pending: Pending): void {
    if (this.#pending[0] === pending) this.#pending.shift();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#slice);
  }

  // One slice: the queue's decodes in order, until the budget is spent.
  readonly #slice = (): void => {
    this.#scheduled = false;
    let budget = DECODE_SLICE_WORK;
    while (budget > 0 && this.#pending.length > 0) {
      const pending = this.#pending[0]!;
      const before = pending.decode.work;
      if (!this.#advance(pending, budget)) break;
      budget -= pending.decode.work - before;
    }
    if (this.#pending.length > 0) this.#schedule();
    else this.#drained();
  };

  #drained(): void {
    if (this.#pending.length > 0) return;
    for (const resolve of this.#drainWaiters.splice(0)) resolve();
  }
}
