// The budgets guest code runs under: execution time (the interrupt handler and the slice clock)
// and stack (what the running thread can spare).
#include <algorithm>

#include "engine.h"
#include "executor.h"
#include "platform.h"

namespace qjsn {

namespace {

// This thread's CPU clock at the last reading an engine took on it (0: the thread's start). What
// a slice used before its first reading is at most what the thread used since that reading.
thread_local int64_t lastThreadCpuNs = 0;

// This thread's CPU clock; *sinceLastNs gets the CPU time it used since the previous reading.
int64_t readThreadCpu(int64_t* sinceLastNs) {
  int64_t cpu = threadCpuNs();
  *sinceLastNs = cpu - lastThreadCpuNs;
  lastThreadCpuNs = cpu;
  return cpu;
}

// A slice that ends without a poll and ran longer than this wall time reads the CPU clock: the
// wall time of a thread that waited for a core is not the guest's to pay.
constexpr int64_t kUnpolledCpuCheckNs = 1000000;

}  // namespace

int Engine::onInterrupt() {
  if (stop_.load(std::memory_order_relaxed) != 0) return 1;
  if (sliceWallDeadlineNs_.load(std::memory_order_relaxed) == 0) return 0;
  // Past the executor's cap, a guest that used its time slice lets the next in line run. It sleeps
  // in wall time, not CPU: its budget does not shrink, and once the slice has its CPU mark (the
  // first poll) the watchdog does not take the sleep for a stuck built-in.
  if (cpuMarkNs_ >= 0) {
    Executor& executor = Executor::instance();
    if (executor.sliceUsedUp(cpuMarkNs_)) {
      executor.handOver(this, stop_);
      if (stop_.load(std::memory_order_relaxed) != 0) return 1;
    }
  }
  // CPU time never runs faster than wall time: until enough wall time has passed the deadline
  // cannot have been reached, and the monotonic clock is cheap.
  int64_t now = monotonicNs();
  if (now < nextCpuCheckNs_) return 0;
  int64_t cpuSinceLastRead;
  int64_t cpu = readThreadCpu(&cpuSinceLastRead);
  if (cpuMarkNs_ < 0) {
    cpuMarkNs_ = cpu;
    beforeMarkNs_ = std::min(now - sliceStartNs_, cpuSinceLastRead);
    sliceCpuDeadlineNs_.store(cpu + sliceRemainingNs_.load(std::memory_order_relaxed) - beforeMarkNs_);
  }
  int64_t deadline = sliceCpuDeadlineNs_.load(std::memory_order_relaxed);
  if (cpu < deadline) {
    nextCpuCheckNs_ = now + (deadline - cpu);
    return 0;
  }
  // The CPU count includes the host calls' CPU time: the wall time without them says whether the
  // guest itself has used its budget.
  int64_t wallDeadline = sliceWallDeadlineNs_.load(std::memory_order_relaxed);
  if (now < wallDeadline) {
    nextCpuCheckNs_ = wallDeadline;
    return 0;
  }
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
  budgetMs_ = budgetMs;
  resumeClock();
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

void Engine::resumeClock() {
  sliceStartNs_ = monotonicNs();
  double remainingMs = budgetMs_ - executionMs_;
  int64_t remainingNs = remainingMs > 0 ? static_cast<int64_t>(remainingMs * 1e6) : 0;
  cpuMarkNs_ = -1;
  hostNs_ = 0;
  nextCpuCheckNs_ = sliceStartNs_;  // the first poll takes the mark
  sliceRemainingNs_.store(remainingNs);
  sliceCpuDeadlineNs_.store(0);
  sliceWallDeadlineNs_.store(std::max<int64_t>(sliceStartNs_ + remainingNs, 1));  // 0 means "no guest code runs"
}

void Engine::pauseClock() {
  // Not running: a slice that ended the eval leaves the guest again at the end of the slice, and
  // counting it twice doubled the executionMs of async evals stopped in their first slice.
  if (sliceWallDeadlineNs_.load(std::memory_order_relaxed) == 0) return;
  int64_t wallNs = monotonicNs() - sliceStartNs_;
  int64_t ranNs;
  int64_t cpuSinceLastRead;
  if (cpuMarkNs_ >= 0) {
    ranNs = beforeMarkNs_ + readThreadCpu(&cpuSinceLastRead) - cpuMarkNs_;
  } else {
    ranNs = wallNs;
    if (ranNs > kUnpolledCpuCheckNs) {
      readThreadCpu(&cpuSinceLastRead);
      ranNs = std::min(ranNs, cpuSinceLastRead);
    }
  }
  executionMs_ += static_cast<double>(std::max<int64_t>(std::min(ranNs, wallNs - hostNs_), 0)) / 1e6;
  hostNs_ = 0;
  sliceWallDeadlineNs_.store(0);
  sliceCpuDeadlineNs_.store(0);
}

void Engine::leaveGuest() { pauseClock(); }

void Engine::excludeHostTime(int64_t ns) {
  if (ns <= 0) return;
  hostNs_ += ns;
  sliceWallDeadlineNs_.fetch_add(ns, std::memory_order_relaxed);
}

}  // namespace qjsn
