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
  #last: Promise<void> = Promise.resolve();
  #size = 0; // queued or running eval()/run() calls and snapshots

  /** True while an eval (or snapshot) is queued or running. */
  get busy(): boolean {
    return this.#size > 0;
  }

  /**
   * Runs an eval with its options `o`: at once when nothing is queued or running, else behind the
   * queue. Its report, or a promise of it when it did not end while evalAsync waited for it.
   */
  start<R>(o: EvalOptions, run: (o: EvalOptions) => R | Promise<R>): R | Promise<R> {
    if (this.#size > 0) return this.enqueue(() => run(o));
    // This turn's time for evals answered at once is spent: start after a turn of the event loop
    // (and so still answered at once), rather than as an eval answered through the loop, which
    // costs several times more and, answered within the same turn, would not let timers run either.
    if (o.inline !== true && !mayAnswerNow()) return this.enqueue(async () => run(await nextTurn(o)));
    // Admitted before the clock's now() runs: an eval it starts waits for this one.
    const release = this.#admit();
    let ran: R | Promise<R>;
    try {
      ran = run(o);
    } catch (err) {
      release();
      throw err;
    }
    if (ran instanceof Promise) ran.then(release, release);
    else release();
    return ran;
  }

  /** Runs `work` after every queued eval (and queued snapshot) has finished. */
  async enqueue<T>(work: () => T | Promise<T>): Promise<T> {
    const previous = this.#last;
    const release = this.#admit();
    try {
      await previous;
      return await work();
    } finally {
      release();
    }
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
