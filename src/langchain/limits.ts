/**
 * Bounds of the code-interpreter middleware's options and of what guest code may ask of it. The
 * engine's own bounds stay in src/options.ts (`SANDBOX_LIMITS`); these belong to the agent layer.
 */

const KiB = 1024;
const MiB = 1024 * KiB;

/** Bounds of the code-interpreter middleware's options and of what guest code may ask of it. */
export const INTERPRETER_LIMITS = Object.freeze({
  /**
   * Least `maxResultChars`: room for every section of a reply (notice, console, error, hint,
   * status) with a head, a tail and a marker in each. The five section tags alone take 97.
   */
  minResultChars: 300,
  maxCodeBytes: Object.freeze({ min: 1 * KiB, max: 64 * MiB }),
  /** Least `maxSnapshotBytes`. */
  minSnapshotBytes: 1 * KiB,
  /** Least length of `snapshotSigningKey`, bytes. */
  minSigningKeyBytes: 16,
  /** Least `sessionIdleTimeoutMs`. */
  minSessionIdleTimeoutMs: 1000,
  /** `task()` calls in flight per session; more wait in a queue. */
  subagentsInFlight: 32,
  /** `task()` calls waiting per session; one more rejects (host memory, not the guest's, holds the queue). */
  subagentsQueued: 4096,
  /** A `task()` `responseSchema`: serialized size, nesting depth, properties per object. */
  responseSchema: Object.freeze({ maxBytes: 4096, maxDepth: 5, maxProperties: 32 }),
});
