// The execution clock (native/budget_clock.h): a slice's start and end, and the interrupt
// handler's CPU check.
#include "budget_clock.h"

#include <time.h>

#include <algorithm>

#include "threads.h"

namespace qjsn {

int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

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

bool BudgetClock::spentByCpu(int64_t now) {
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
    return false;
  }
  // The CPU count includes the host calls' CPU time: the wall time without them says whether the
  // guest itself has used its budget.
  int64_t wallDeadline = sliceWallDeadlineNs_.load(std::memory_order_relaxed);
  if (now < wallDeadline) {
    nextCpuCheckNs_ = wallDeadline;
    return false;
  }
  return true;
}

void BudgetClock::resume() {
  sliceStartNs_ = monotonicNs();
  double remainingMs = budgetMs_ - executionMs();
  int64_t remainingNs = remainingMs > 0 ? static_cast<int64_t>(remainingMs * 1e6) : 0;
  cpuMarkNs_ = -1;
  hostNs_ = 0;
  nextCpuCheckNs_ = sliceStartNs_;  // the first poll takes the mark
  sliceRemainingNs_.store(remainingNs);
  sliceCpuDeadlineNs_.store(0);
  sliceWallDeadlineNs_.store(std::max<int64_t>(sliceStartNs_ + remainingNs, 1));  // 0 means "no guest code runs"
}

void BudgetClock::pause() {
  // Not running: a slice that ended the eval leaves the guest again at the end of the slice, and
  // counting it twice doubled the executionMs of async evals stopped in their first slice.
  if (!running()) return;
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
  double sliceMs = static_cast<double>(std::max<int64_t>(std::min(ranNs, wallNs - hostNs_), 0)) / 1e6;
  executionMs_.store(executionMs() + sliceMs, std::memory_order_relaxed);
  hostNs_ = 0;
  sliceWallDeadlineNs_.store(0);
  sliceCpuDeadlineNs_.store(0);
}

}  // namespace qjsn
