/**
 * A budget of main-thread time per turn of the event loop, for work that can go on without one: an
 * eval answered while the main thread briefly waits for it, an awaited host call settled while the
 * guest's next call is already there. Such work keeps every other timer and I/O callback waiting,
 * so once `budgetMs` has passed since the first piece of it in this turn, the caller defers the
 * rest to the next turn. One clock read per piece, one `setImmediate` per turn that had any.
 */
export function perTurnBudget(budgetMs: number): (nowMs?: number) => boolean {
  let startedAt = -1; // when this turn's work began; -1: a turn came since
  const turnEnded = (): void => {
    startedAt = -1;
  };
  return (nowMs = performance.now()) => {
    if (startedAt < 0) {
      startedAt = nowMs;
      setImmediate(turnEnded);
      return true;
    }
    return nowMs - startedAt < budgetMs;
  };
}
