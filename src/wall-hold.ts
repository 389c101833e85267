/**
 * A pause of an eval's wall budget (`EvalOptions.wallHold`): the time it is held does not count.
 * The LangChain eval tool holds it while a reviewed host call waits for a human, so a normal human
 * wait does not run out the budget. The execution budget is not affected (a guest awaiting a host
 * call is idle).
 */
export class WallHold {
  #held = false;
  readonly #listeners = new Set<(held: boolean) => void>();

  /** True while the wall budget is suspended. */
  get held(): boolean {
    return this.#held;
  }

  /** Suspends the wall budget of the eval(s) watching this hold. */
  hold(): void {
    this.#set(true);
  }

  /** Lets the wall budget run again, for what was left of it. */
  release(): void {
    this.#set(false);
  }

  /** Calls `listener` on every change; returns the function that stops it. */
  watch(listener: (held: boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #set(held: boolean): void {
    if (this.#held === held) return;
    this.#held = held;
    for (const listener of this.#listeners) listener(held);
  }
}

/**
 * Runs `expire` once `wallMs` of unheld time has passed; returns the function that cancels it.
 * Without a hold it is a plain timer.
 */
export function wallTimer(wallMs: number, expire: () => void, hold: WallHold | undefined): () => void {
  let left = wallMs;
  let since = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (): void => {
    since = performance.now();
    timer = setTimeout(expire, left);
  };
  const disarm = (): void => {
    clearTimeout(timer);
    timer = undefined;
    left = Math.max(0, left - (performance.now() - since));
  };
  if (hold?.held !== true) arm();
  const unwatch = hold?.watch((held) => (held ? disarm() : arm()));
  return () => {
    clearTimeout(timer);
    unwatch?.();
  };
}
