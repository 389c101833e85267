// What the guest sees of time and chance: a per-context clock override and Math.random state
// (deps/patches/0030). Policy (frozen per eval, host-supplied, seeds) lives in src/sandbox.ts;
// this only applies it while no guest code runs.
#include <cmath>

#include "engine.h"

namespace qjsn {

bool Engine::setClock(bool fixed, double epochMs, bool localTimeUtc) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ctx_ || !lifecycle_.idle()) return false;
  // A time value outside the Date range would make `new Date()` invalid; refuse it whole.
  if (fixed && !(std::isfinite(epochMs) && std::fabs(epochMs) <= 8.64e15)) return false;
  JS_SetDateNow(ctx_, fixed, fixed ? std::trunc(epochMs) : 0);
  JS_SetLocalTimeUTC(ctx_, localTimeUtc);
  return true;
}

bool Engine::setRandomSeed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ctx_ || !lifecycle_.idle()) return false;
  JS_SetRandomSeed(ctx_, seed);
  return true;
}

bool Engine::randomState(uint64_t* state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ctx_ || !lifecycle_.idle()) return false;
  *state = JS_GetRandomState(ctx_);
  return true;
}

bool Engine::setRandomState(uint64_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ctx_ || !lifecycle_.idle()) return false;
  JS_SetRandomState(ctx_, state);
  return true;
}

}  // namespace qjsn
