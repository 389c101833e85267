// Case (g): resident memory per live session, measured in a process that does nothing else.
import { guestSource } from "../workloads/sources.js";

const RSS_CAP = 12 * 1024 ** 3;

async function settleHeap() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** RSS growth per session after creating `count` sessions that each evaluated `1+1`. */
export async function runMemoryCase(adapter, count, { onProgress } = {}) {
  const code = guestSource("one-plus-one.js");
  const touch = async (s) => (s.evalSync ? s.evalSync(code) : await s.evalAsync(code));
  // One throwaway session first: lazily built shared state is load cost, not per-session cost.
  const warm = await adapter.createSession();
  await touch(warm);
  warm.dispose();
  await settleHeap();
  const before = process.memoryUsage.rss();
  const live = [];
  let stoppedEarly = false;
  for (let i = 0; i < count; i++) {
    const s = await adapter.createSession();
    await touch(s);
    live.push(s);
    if ((i + 1) % 1000 === 0) {
      onProgress?.(`${i + 1}/${count} sessions`);
      if (process.memoryUsage.rss() > RSS_CAP) {
        stoppedEarly = true;
        break;
      }
    }
  }
  await settleHeap();
  const after = process.memoryUsage.rss();
  const perSessionBytes = (after - before) / live.length;
  return {
    status: "ok",
    perSessionKB: perSessionBytes / 1024,
    sessions: live.length,
    ...(stoppedEarly ? { note: `stopped at ${live.length} sessions: RSS passed ${RSS_CAP / 1024 ** 3} GiB` } : {}),
  };
}
