// The budgets guest code runs under: execution time (the interrupt handler, over the clock of
// native/budget_clock.h) and stack (what the running thread can spare).
#include "engine.h"
#include "executor.h"
#include "platform.h"

namespace qjsn {

int Engine::onInterrupt() {
  if (stop_.load(std::memory_order_relaxed) != 0) return 1;
  if (!clock_.running()) return 0;
  // Past the executor's cap, a guest that used its time slice lets the next in line run. It sleeps
  // in wall time, not CPU: its budget does not shrink, and once the slice has its CPU mark (the
  // first poll) the watchdog does not take the sleep for a stuck built-in.
  if (clock_.cpuMarkNs() >= 0) {
    Executor& executor = Executor::instance();
    if (executor.sliceUsedUp(clock_.cpuMarkNs())) {
      executor.handOver(this, stop_);
      if (stop_.load(std::memory_order_relaxed) != 0) return 1;
    }
  }
  if (!clock_.spent()) return 0;
  int expected = 0;
  stop_.compare_exchange_strong(expected, static_cast<int>(StopReason::ExecutionBudget));
  return 1;
}

namespace {

// Bytes of stack left below the caller on this thread, or 0 when unknown. Executor threads have a
// known, large stack; the Node main thread's is whatever the process got (often 8 MiB, partly used).
size_t stackRemaining() {
  thread_local uintptr_t low = 0;
  if (low == 0) {
    low = platform::currentThreadStackLow();
    if (low == 0) return 0;
  }
  char here;
  uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
  return sp > low ? sp - low : 0;
}

// Stack kept below the guest's budget for C frames that run past the engine's checks (built-ins,
// the regexp engine, JSON, raising the overflow error): half of what the thread has left, within
// these bounds. Threads with a small stack (a Worker with resourceLimits.stackSizeMb 0.5) get a
// smaller guest budget, and below kMinGuestStackBytes + kMinStackReserveBytes nothing runs.
constexpr size_t kMaxStackReserveBytes = 512 * 1024;
constexpr size_t kMinStackReserveBytes = 128 * 1024;
constexpr size_t kMinGuestStackBytes = 48 * 1024;

}  // namespace

bool Engine::enterGuest(double budgetMs) {
  clock_.begin(budgetMs);
  return clampStack();
}

bool Engine::clampStack() {
  JS_UpdateStackTop(rt_);
  // The guest's stack budget never exceeds what this thread really has left.
  size_t stack = options_.maxStackSizeBytes;
  size_t remaining = stackRemaining();
  if (remaining != 0) {
    if (remaining < kMinStackReserveBytes + kMinGuestStackBytes) return false;
    size_t reserve = remaining / 2;
    reserve = reserve < kMinStackReserveBytes   ? kMinStackReserveBytes
              : reserve > kMaxStackReserveBytes ? kMaxStackReserveBytes
                                                : reserve;
    if (remaining - reserve < stack) stack = remaining - reserve;
  }
  JS_SetMaxStackSize(rt_, stack);
  return true;
}

std::string Engine::stackRefusal() {
  return "the calling thread has only " + std::to_string(stackRemaining() / 1024) +
         " KiB of stack left; nothing was run (the guest needs at least " +
         std::to_string((kMinStackReserveBytes + kMinGuestStackBytes) / 1024) + " KiB)";
}

void Engine::leaveGuest() { clock_.pause(); }

}  // namespace qjsn
