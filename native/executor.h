// Threads owned by the addon that run async evals. Never the libuv pool, which serves Node's own
// I/O. Each engine is entered by one thread at a time; a watchdog answers evals stuck in a
// built-in that cannot be interrupted and replaces their thread so capacity is kept.
#pragma once

#include <memory>

#include "engine.h"

namespace qjsn {

class Executor {
 public:
  // Process-wide; threads start on first use.
  static Executor& instance();
  void schedule(std::shared_ptr<Engine> engine);

  // Bytes of stack each executor thread gets; maxStackSizeBytes must stay well below it.
  static constexpr size_t kThreadStackBytes = 16u << 20;
  // CPU time a slice may keep burning past its deadline (or a stop request) before the watchdog
  // calls it stuck.
  static constexpr int64_t kWatchdogGraceNs = 300 * 1000000LL;

  struct State;

 private:
  Executor();
  State* state_;
};

}  // namespace qjsn
