// The platform's threads and CPU clocks, in one place: executor threads are created here (explicit
// stack size, detached, lower priority) and execution budgets read per-thread CPU time here, so a
// port touches this file only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>

namespace qjsn {

// Starts a detached thread running body(arg) on a stack of `stackBytes`. False when the system
// refuses (out of threads or address space).
bool startThread(void* (*body)(void*), void* arg, size_t stackBytes);

// Lowers the calling thread's priority: guest code is batch work and the Node event loop must win
// a contested core.
void lowerThreadPriority();

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
