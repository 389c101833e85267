// The platform's threads and CPU clocks, in one place: executor threads are created here (explicit
// stack size, detached, lower priority) and execution budgets read per-thread CPU time here, so a
// port touches this file only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>

namespace qjsn {

// Starts a detached thread running body(arg) on a stack of `stackBytes`. False when the system
// refuses (out of threads or address space).
bool startThread(void* (*body)(void*), void* arg, size_t stackBytes);

// Lowers the calling thread's priority, for batch work no caller waits for (the reaper's frees).
// Executor threads keep the process's priority: below it, every ordinary process on a busy host
// would starve guests (an eval of 1.4 s of CPU took 12-16 s at nice 10 beside two busy loops).
void lowerThreadPriority();

// Nanoseconds the process's main thread has spent runnable but waiting for a core, since it
// started; -1 where the platform does not say (Linux: /proc/self/schedstat's second field).
int64_t mainThreadRunDelayNs();
// Threads of the whole machine that are running or ready to run right now, the caller included; -1
// where the platform does not say (Linux: /proc/loadavg).
int runnableThreads();
// Makes the two readings above (run delay, runnable threads) answer -1 without opening /proc (a confined helper process).
void disallowProcReads();

// Tells the CPU the caller is busy-waiting (x86 `pause`, Arm `yield`): cheaper for the sibling
// hyper-thread and for the core's power than a bare loop, and far cheaper than a system call.
void cpuRelax();

// How many hand-overs skip their busy-wait after one that missed: a miss means the answer is
// slow right now (a long eval, a slow host function, a busy host), so spinning again would mostly
// burn a core the event loop or another guest could use. Every spin in the addon uses this rule.
constexpr int kSpinSkipsAfterMiss = 16;

// Busy-waits until ready() or `ns` nanoseconds have passed; true when ready() said so. The clock
// is read only every few dozen pauses.
template <typename Ready>
bool spinUntil(int64_t ns, Ready ready) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (true) {
    for (int i = 0; i < 32; i++) {
      if (ready()) return true;
      cpuRelax();
    }
    if (std::chrono::steady_clock::now() >= until) return ready();
  }
}

// A clock that is nearly free to read (a few ns) but ticks only every few milliseconds. The sum of
// its differences over many intervals estimates their total length without bias (a short interval
// counts either nothing or one tick, in proportion to its length), which is enough to keep host
// functions' time out of an execution budget. Inline where the C library has it: a sync host call
// reads it twice, and a call through this file was a tenth of the call's native overhead.
#if defined(CLOCK_MONOTONIC_COARSE)
inline int64_t coarseMonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
#else
int64_t coarseMonotonicNs();
#endif

// CPU time the calling thread has consumed, in nanoseconds. Time spent waiting for a core, asleep
// or blocked does not count.
int64_t threadCpuNs();

// One thread's CPU clock, readable from any thread (the watchdog reads the clock of the thread
// running a slice).
class CpuClock {
 public:
  static CpuClock ofCurrentThread();
  // Nanoseconds of CPU the thread has consumed; -1 when the clock cannot be read.
  int64_t nowNs() const;

 private:
#if defined(_WIN32)
  unsigned long threadId_ = 0;  // a DWORD: the thread is opened per reading, so nothing to close
#else
  clockid_t id_ = CLOCK_THREAD_CPUTIME_ID;
#endif
};

}  // namespace qjsn
