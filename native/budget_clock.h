// The execution clock of one sandbox: how much of an eval's execution budget its guest code has
// used, and when the running slice's budget runs out. The engine starts it when guest code may
// run (Engine::enterGuest), pauses it around what is not the guest's time (a synchronous host
// call, the end of a slice), and asks it from the interrupt handler whether the budget is spent;
// the watchdog reads the running slice's deadlines to tell a stuck slice from a slow one.
//
//     stopped --begin(budget) / resume()--> running --pause()--> stopped (executionMs() += the slice)
//                                           |     ^
//                                           +-----+  spent(): the interrupt handler's poll; the
//                                                    first one takes the slice's CPU mark
//
// The budget is the running thread's CPU time, so a guest waiting for a core (other sessions'
// guests, a loaded machine) loses none of it. Reading a thread's CPU clock is a system call, too
// slow for every slice and host call: a slice counts CPU time from the interrupt handler's first
// poll (the mark) on. Before the mark it counts its wall time, or, when that is less, the CPU time
// its thread used since the thread's previous reading (a slice that waited for a core is not
// charged for the wait). Slices that end before a poll are usually short (a poll comes every few
// thousand operations).
// Host calls timed by the coarse wall clock (excludeHostTime) are not taken off the CPU count: a
// host call's wall time may be far more than its thread's CPU time (a host function that blocks, a
// loaded machine), and taking it off would let a guest that calls one in a loop run forever. The
// guest is charged the lesser of its CPU time and its wall time without the host calls: the budget
// runs out when both have reached it.
//
// Threads: everything but deadlines() and executionMs() is called by the thread that runs the guest
// (one at a time, as Engine's lifecycle guarantees). deadlines() and executionMs() are also the
// watchdog's, on its own thread, while the guest thread may be pausing the clock: the values they
// read are atomics. executionMs_ is written by the guest thread alone, so relaxed loads and stores
// (plain moves) are enough for it. A plain store or load of them is sequentially consistent, as it was
// before the clock was a class of its own; the guest thread's reads of its own writes are relaxed.
#pragma once

#include <atomic>
#include <cstdint>

namespace qjsn {

int64_t monotonicNs();

class BudgetClock {
 public:
  // Runs the clock for a slice of an eval whose whole budget is `budgetMs` of execution.
  void begin(double budgetMs) {
    budgetMs_ = budgetMs;
    resume();
  }
  // Runs the clock again after pause(), under the same budget (a synchronous host call returned).
  void resume();
  // Stops the clock and adds the slice's time to executionMs(). Nothing when it is not running.
  void pause();
  // Keeps `ns` of host time inside the running slice out of the guest's execution time and budget.
  void excludeHostTime(int64_t ns) {
    if (ns <= 0) return;
    hostNs_ += ns;
    sliceWallDeadlineNs_.fetch_add(ns, std::memory_order_relaxed);
  }
  // A new eval (or snapshot read) starts with nothing used.
  void resetExecution() { executionMs_.store(0, std::memory_order_relaxed); }
  // Any thread (Engine::abandon reads it from the watchdog's).
  double executionMs() const { return executionMs_.load(std::memory_order_relaxed); }

  // --- the interrupt handler's questions (guest thread; every poll, so inline and cheap) --------
  // Guest code may be running: between begin()/resume() and pause().
  bool running() const { return sliceWallDeadlineNs_.load(std::memory_order_relaxed) != 0; }
  // The thread CPU time at the slice's first poll; -1 before it.
  int64_t cpuMarkNs() const { return cpuMarkNs_; }
  // True when the running slice has used what was left of the budget. CPU time never runs faster
  // than wall time: until enough wall time has passed the deadline cannot have been reached, and
  // the monotonic clock is cheap, so most polls end here.
  bool spent() {
    int64_t now = monotonicNs();
    if (now < nextCpuCheckNs_) return false;
    return spentByCpu(now);
  }

  // --- the watchdog's view of the running slice (any thread) -----------------------------------
  struct Deadlines {
    int64_t cpuNs;        // thread CPU time at which the budget runs out; 0 before the mark
    int64_t wallNs;       // monotonic; 0 when no guest code runs
    int64_t remainingNs;  // budget left when the slice started
    // The slice has run past its budget by its thread's CPU time `cpuNow` and the monotonic
    // `wallNow`; a slice without a CPU mark (it never polled) by wall time alone.
    bool passed(int64_t cpuNow, int64_t wallNow) const {
      return cpuNs != 0 ? cpuNow > cpuNs && wallNow > wallNs : wallNs != 0 && wallNow > wallNs;
    }
    // The slice's time so far: the deadlines are "where the slice's time reaches its remaining budget".
    int64_t sliceNs(int64_t cpuNow, int64_t wallNow) const {
      return cpuNs != 0 ? remainingNs + cpuNow - cpuNs : wallNs != 0 ? remainingNs + wallNow - wallNs : 0;
    }
  };
  Deadlines deadlines() const {
    return Deadlines{sliceCpuDeadlineNs_.load(), sliceWallDeadlineNs_.load(), sliceRemainingNs_.load()};
  }

 private:
  // spent() once enough wall time has passed: takes the mark on the first poll, then compares the
  // thread's CPU time (and the wall time without host calls) with the deadlines.
  bool spentByCpu(int64_t now);

  std::atomic<int64_t> sliceWallDeadlineNs_{0};  // start + remaining budget + host time, monotonic; 0 when no guest code runs
  std::atomic<int64_t> sliceCpuDeadlineNs_{0};  // thread CPU time at which the budget runs out; 0 before the mark
  std::atomic<int64_t> sliceRemainingNs_{0};    // budget left when the slice started
  int64_t sliceStartNs_ = 0;                    // monotonic
  int64_t cpuMarkNs_ = -1;                      // thread CPU time at the mark; -1 before it
  int64_t beforeMarkNs_ = 0;                    // time charged for the slice before the mark
  int64_t nextCpuCheckNs_ = 0;                  // monotonic time before which the deadline cannot have passed
  int64_t hostNs_ = 0;                          // host calls' wall time in the slice (excludeHostTime)
  double budgetMs_ = 0;
  std::atomic<double> executionMs_{0};
};

}  // namespace qjsn
