/**
 * The guest clock and `Math.random` seed a sandbox gives its engine before each eval. The clock
 * the engine was last given is remembered, so an eval whose clock did not change costs no call
 * into the addon.
 */
import type { NativeHandle } from "./native.js";
import { setGuestClock, setGuestRandomSeed } from "./request.js";
import type { EvalOptions, ResolvedSandboxOptions } from "./types.js";
import { evalClockMs } from "./validate.js";

export class GuestClock {
  readonly #clock: ResolvedSandboxOptions["clock"];
  // (fixed, epoch ms, local time UTC) in force, or undefined when unknown.
  #inForce: [boolean, number, boolean] | undefined;

  constructor(clock: ResolvedSandboxOptions["clock"]) {
    this.#clock = clock;
  }

  /** The time the next eval reads: its own `clockMs`, else the sandbox's clock (a `clock.now()` is host code). */
  timeOf(o: EvalOptions): number | undefined {
    return o.clockMs ?? evalClockMs(this.#clock);
  }

  /** Sets the clock read at `ms` (and the eval's seed) on an idle engine; a busy one refuses, and then the eval too. */
  apply(handle: NativeHandle, ms: number | undefined, o: EvalOptions): void {
    const fixed = ms !== undefined;
    const epochMs = ms ?? 0;
    const utc = o.clockMs !== undefined || this.#clock !== "real";
    const last = this.#inForce;
    if (!last || last[0] !== fixed || last[1] !== epochMs || last[2] !== utc) {
      // A refusal leaves nothing known to be in force.
      this.#inForce = setGuestClock(handle, fixed, epochMs, utc) === undefined ? [fixed, epochMs, utc] : undefined;
    }
    if (o.randomSeed !== undefined) setGuestRandomSeed(handle, o.randomSeed);
  }
}
