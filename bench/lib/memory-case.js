// Case (g): resident memory per live session, measured in a process that does nothing else.
import { guestSource } from "../workloads/sources.js";

// Well under the machine's memory: other work shares it, and the per-session figure is already
// stable long before the cap.
const RSS_CAP = 4 * 1024 ** 3;

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
  let stoppedEarly;
  for (let i = 0; i < count; i++) {
    try {
      const s = await adapter.createSession();
      live.push(s);
      await touch(s);
    } catch (error) {
      // An engine whose heap is full (a 32-bit WASM memory) reports how far it got.
      stoppedEarly = `stopped at ${live.length} sessions: ${String(error?.message ?? error).slice(0, 120)}`;
      break;
    }
    if ((i + 1) % 1000 === 0) {
      onProgress?.(`${i + 1}/${count} sessions`);
      if (process.memoryUsage.rss() > RSS_CAP) {
        stoppedEarly = `stopped at ${live.length} sessions: RSS passed ${RSS_CAP / 1024 ** 3} GiB`;
        break;
      }
    }
  }
  if (live.length === 0) return { status: "failed", reason: stoppedEarly };
  await settleHeap();
  const after = process.memoryUsage.rss();
  const perSessionBytes = (after - before) / live.length;
  return {
    status: "ok",
    perSessionKB: perSessionBytes / 1024,
    sessions: live.length,
    ...(stoppedEarly ? { note: stoppedEarly } : {}),
  };
}
