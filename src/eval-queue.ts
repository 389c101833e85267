/**
 * The order a sandbox's evals run in. Its `eval()`/`run()` calls and its off-thread snapshots run
 * one at a time, in call order: one that finds nothing queued or running starts at once (and, when
 * it ends while the main thread briefly waits for it, is answered at once, its promise already
 * settled); any other waits behind the last one queued. Answers at once are rationed per turn of the
 * event loop, so that a loop of evals still lets timers and I/O run. `evalSync`/`runSync` never
 * queue: they are refused while the queue is {@link EvalQueue.busy}.
 */
import { perTurnBudget } from "./turn-budget.js";
import type { EvalOptions } from "./types.js";

/**
 * How long evals may go on being answered without a turn of the event loop. An eval that ends
 * while the main thread briefly waits for it is answered at once, its promise already settled; in
 * a loop of `await sb.eval(...)` nothing else would then run, no timer and no I/O, until the loop
 * ends. So once 1 ms has passed since the first such answer, evals wait for a turn again.
 */
export const mayAnswerNow = perTurnBudget(1);

/** Resolves with `value` after a turn of the event loop (timers and I/O callbacks run first). */
function nextTurn<T>(value: T): Promise<T> {
  return new Promise((resolve) => setImmediate(resolve, value));
}

/** One sandbox's queue of evals and off-thread snapshots. */
export class EvalQueue {
  // Settles when the last one queued ends; undefined while the one admitted at once is the last
  // (its promise is made only when another waits for it) or when nothing was queued since.
  #last: Promise<void> | undefined;
  #size = 0; // queued or running eval()/run() calls and snapshots
  #atOnce = false; // the one admitted by admitNow() is running
  #openAtOnce: (() => void) | undefined; // settles the promise another waits on for it

  /** True while an eval (or snapshot) is queued or running. */
  get busy(): boolean {
    return this.#size > 0;
  }

  /**
   * Admits an eval with options `o` to run at once, when nothing is queued or running and this
   * turn's time for evals answered at once is not spent: the caller runs it, then calls
   * {@link EvalQueue.endsWith} with what it returned (or undefined when it threw). Else false:
   * the caller runs it through {@link EvalQueue.later}. Allocates nothing: this is every eval's path.
   */
  admitNow(o: EvalOptions): boolean {
    if (this.#size > 0) return false;
    if (o.inline !== true && !mayAnswerNow()) return false;
    // Admitted before the clock's now() runs: an eval it starts waits for this one.
    this.#size++;
    this.#atOnce = true;
    this.#last = undefined;
    return true;
  }

  /** The eval admitted at once ended, or ends when `ran` (a promise) settles; returns `ran`. */
  endsWith<R>(ran: R): R {
    if (ran instanceof Promise) ran.then(this.#releaseAtOnce, this.#releaseAtOnce);
    else this.#releaseAtOnce();
    return ran;
  }

  readonly #releaseAtOnce = (): void => {
    this.#size--;
    this.#atOnce = false;
    const open = this.#openAtOnce;
    this.#openAtOnce = undefined;
    open?.();
  };

  /**
   * Runs an eval {@link EvalQueue.admitNow} refused, with its options `o`: behind the queue, or,
   * when this turn's time for evals answered at once is spent, after a turn of the event loop (and
   * so still answered at once), rather than as an eval answered through the loop, which costs
   * several times more and, answered within the same turn, would not let timers run either.
   */
  later<R>(o: EvalOptions, run: (o: EvalOptions) => R | Promise<R>): Promise<R> {
    if (this.#size > 0) return this.enqueue(() => run(o));
    return this.enqueue(async () => run(await nextTurn(o)));
  }

  /** Runs `work` after every queued eval (and queued snapshot) has finished. */
  async enqueue<T>(work: () => T | Promise<T>): Promise<T> {
    const previous = this.#last ?? this.#endOfAtOnce();
    const release = this.#admit();
    try {
      await previous;
      return await work();
    } finally {
      release();
    }
  }

  // A promise that settles when the eval admitted at once ends (undefined when none runs).
  #endOfAtOnce(): Promise<void> | undefined {
    if (!this.#atOnce) return undefined;
    return new Promise((resolve) => (this.#openAtOnce = resolve));
  }

  // Counts an eval (or snapshot) in and makes later ones wait for it until the returned function
  // is called.
  #admit(): () => void {
    let open!: () => void;
    this.#last = new Promise((resolve) => (open = resolve));
    this.#size++;
    return () => {
      this.#size--;
      open();
    };
  }
}
