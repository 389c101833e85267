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

/** How an eval runs once its turn comes: `code` with its options `o`, and what its caller adds (`a`, `b`). */
export type EvalRunner<C, A, B, R> = (code: C, o: EvalOptions, a: A, b: B) => R | Promise<R>;

/** One sandbox's queue of evals (run by one {@link EvalRunner}) and off-thread snapshots. */
export class EvalQueue<C, A, B, R> {
  readonly #run: EvalRunner<C, A, B, R>;
  // Settles when the last one queued ends; undefined while the one admitted at once is the last
  // (its promise is made only when another waits for it) or when nothing was queued since.
  #last: Promise<void> | undefined;
  #size = 0; // queued or running eval()/run() calls and snapshots
  #atOnce = false; // an eval admitted at once is running
  #openAtOnce: (() => void) | undefined; // settles the promise another waits on for it

  constructor(run: EvalRunner<C, A, B, R>) {
    this.#run = run;
  }

  /** True while an eval (or snapshot) is queued or running. */
  get busy(): boolean {
    return this.#size > 0;
  }

  /**
   * Runs an eval of `code` with its options `o` (and `a`, `b`): at once when nothing is queued or
   * running, else behind the queue. Its result, or a promise of it when it did not end while
   * evalAsync waited for it. One admitted at once (every eval of a loop) costs no closure and no promise.
   */
  start(code: C, o: EvalOptions, a: A, b: B): R | Promise<R> {
    if (this.#size > 0 || (o.inline !== true && !mayAnswerNow())) return this.#later(code, o, a, b);
    // Admitted before the clock's now() runs: an eval it starts waits for this one.
    this.#size++;
    this.#atOnce = true;
    this.#last = undefined;
    let ran: R | Promise<R>;
    try {
      ran = this.#run(code, o, a, b);
    } catch (err) {
      this.#releaseAtOnce();
      throw err;
    }
    if (ran instanceof Promise) ran.then(this.#releaseAtOnce, this.#releaseAtOnce);
    else this.#releaseAtOnce();
    return ran;
  }

  // Runs an eval not admitted at once: behind the queue, or, when this turn's time for evals
  // answered at once is spent, after a turn of the event loop (and so still answered at once),
  // rather than as an eval answered through the loop, which costs several times more and,
  // answered within the same turn, would not let timers run either. A method of its own: its
  // closures in start() would cost every eval a heap context.
  #later(code: C, o: EvalOptions, a: A, b: B): Promise<R> {
    if (this.#size > 0) return this.enqueue(() => this.#run(code, o, a, b));
    return this.enqueue(async () => this.#run(code, await nextTurn(o), a, b));
  }

  readonly #releaseAtOnce = (): void => {
    this.#size--;
    this.#atOnce = false;
    const open = this.#openAtOnce;
    this.#openAtOnce = undefined;
    open?.();
  };

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
