// Shared checks of the hostile-input suites: every attack must leave the host process alive and
// responsive, fail with a typed SandboxError, give its memory back, and leave other sandboxes
// exactly as they were.
import { afterEach, expect } from "vitest";
import {
  Sandbox,
  SandboxError,
  type RestoreOptions,
  type SandboxErrorCode,
  type SandboxOptions,
} from "../../src/index.js";

const live: Sandbox[] = [];

/** A sandbox disposed after the current test. */
export function sandbox(options?: SandboxOptions): Sandbox {
  const sb = new Sandbox(options);
  live.push(sb);
  return sb;
}

/** A sandbox restored from `bytes`, disposed after the current test. */
export function restored(bytes: Uint8Array, options?: RestoreOptions): Sandbox {
  const { sandbox: sb } = Sandbox.restore(bytes, options);
  live.push(sb);
  return sb;
}

afterEach(() => {
  for (const sb of live.splice(0)) sb.dispose();
});

// Fails the test unless `err` is a SandboxError.
function sandboxErrorOf(err: unknown): SandboxError {
  expect(err).toBeInstanceOf(SandboxError);
  return err as SandboxError;
}

/** The SandboxError code `fn` throws (synchronously or by rejecting); fails the test for any other error. */
export async function codeOf(fn: () => unknown): Promise<SandboxErrorCode | "no error"> {
  try {
    await fn();
  } catch (err) {
    return sandboxErrorOf(err).code;
  }
  return "no error";
}

/** The SandboxError code the synchronous `fn` throws; fails the test for any other error. */
export function syncCodeOf(fn: () => unknown): SandboxErrorCode | "no error" {
  try {
    fn();
  } catch (err) {
    return sandboxErrorOf(err).code;
  }
  return "no error";
}

/** The SandboxError the synchronous `fn` throws; fails the test if it throws anything else or nothing. */
export function caught(fn: () => unknown): SandboxError {
  try {
    fn();
  } catch (err) {
    return sandboxErrorOf(err);
  }
  throw new Error("expected a SandboxError, got a value");
}

/** The SandboxError `p` rejects with; fails the test if it rejects with anything else or resolves. */
export async function rejected(p: Promise<unknown>): Promise<SandboxError> {
  try {
    await p;
  } catch (err) {
    return sandboxErrorOf(err);
  }
  throw new Error("expected a SandboxError, got a value");
}

/**
 * What the guest sees of a frozen global host service `service` installed by
 * `defineFrozenAsyncFunction` with a host function answering `{ echoed: args[0] }`: compare it
 * with {@link FROZEN_SERVICE_SHAPE}.
 */
export function frozenServiceShape(sb: Sandbox): Promise<unknown> {
  return sb.eval(`({
    descriptor: (({ writable, enumerable, configurable }) => ({ writable, enumerable, configurable }))(Object.getOwnPropertyDescriptor(globalThis, "service")),
    frozen: Object.isFrozen(service),
    name: service.name,
    length: service.length,
    assigned: (() => { globalThis.service = 1; return typeof service; })(),
    deleted: delete globalThis.service,
    answer: await service({ q: 1 }, "ignored"),
  })`);
}

/** A frozen, read-only, non-configurable function that answers through the host. */
export const FROZEN_SERVICE_SHAPE = {
  descriptor: { writable: false, enumerable: false, configurable: false },
  frozen: true,
  name: "service",
  length: 1,
  assigned: "function",
  deleted: false,
  answer: { echoed: { q: 1 } },
};

/** Asserts the Node event loop turns within `withinMs` (it is not blocked by a guest). */
export async function expectHostResponsive(withinMs = 250): Promise<void> {
  const started = performance.now();
  await new Promise<void>((resolve) => setImmediate(resolve));
  expect(performance.now() - started).toBeLessThan(withinMs);
}

/**
 * A bystander: a sandbox created before an attack, holding state. `check()` asserts the attack
 * did not touch it (its global survives, it still evaluates, it is not busy or broken).
 */
export function bystander(): { sb: Sandbox; check(): Promise<void> } {
  const sb = sandbox();
  sb.evalSync("globalThis.marker = { n: 7, text: 'untouched' }");
  return {
    sb,
    async check() {
      expect(sb.evalSync("marker.n * 6")).toBe(42);
      expect(await sb.eval("marker.text")).toBe("untouched");
    },
  };
}

/**
 * Asserts a sandbox's runtime gives memory back after an attack: usage after a GC-triggering
 * eval is within `slackBytes` of `baselineBytes`.
 */
export function expectMemoryBack(sb: Sandbox, baselineBytes: number, slackBytes = 512 * 1024): void {
  // A fresh allocation-heavy eval makes the engine collect whatever the attack left behind.
  sb.evalSync("{ let junk = []; for (let i = 0; i < 2000; i++) junk.push({ i }); junk = null; } undefined");
  expect(sb.memoryUsage().usedBytes).toBeLessThan(baselineBytes + slackBytes);
}

/**
 * Runs `fn` and returns its result with the CPU time the process spent meanwhile, in ms (every
 * thread: the guest's executor thread and the host's main thread). Bounds on work use this, not
 * the wall time, which a loaded machine stretches at will.
 */
export async function cpuTimed<T>(fn: () => Promise<T> | T): Promise<[T, number]> {
  const before = process.cpuUsage();
  const result = await fn();
  const used = process.cpuUsage(before);
  return [result, (used.user + used.system) / 1000];
}

/** Counts event-loop turns until `pending` settles: work done inline on the main thread lets none pass. */
export async function turnsWhile<T>(pending: Promise<T>): Promise<{ turns: number; settled: PromiseSettledResult<T> }> {
  let done = false;
  let turns = 0;
  const tick = (): void => {
    if (done) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const settled = (await Promise.allSettled([pending]))[0]!;
  done = true;
  return { turns, settled };
}
