// Threads owned by the addon that run async evals. Never the libuv pool, which serves Node's own
// I/O. Each engine is entered by one thread at a time.
//
// Fairness: QuickJS cannot set aside a running guest's C stack, so the unit the system can preempt
// is a thread. Every runnable eval gets a thread of its own, created on demand, and up to a cap
// (kDefaultMaxThreads, or QJSN_EXECUTOR_THREADS) of them run guest code at once, which the OS
// time-slices: a guest spinning in `while (true) {}` cannot hold back a ready eval of another
// session. Past the cap, a guest that has used a time slice of its own CPU while others wait hands
// its turn over and its thread sleeps, keeping the guest's stack, until the turn comes back
// (native/guest_turns.h: the line, the slice, the diagram). Budgets count the thread's own CPU
// time (native/threads.h), so waiting for a core or a turn never uses up a budget. Threads run at
// the process's own priority (see threads.h for how the event loop keeps its edge).
//
//   worker:  idle (spin up to kSpinNs while a core is free, then sleep) --engine queued--> running
//            a slice --slice ends--> idle; idle past kIdleExitNs while more than one thread per core
//            exists --> exits. After kSpinMissesBeforeSkips idle spins in a row that found no
//            work, the next kSpinSkipsAfterMiss idle spells sleep without spinning, unless work
//            comes back to back again (IdleSpinPolicy in executor.cc).
//
// Spinning: waking a sleeping thread costs tens of microseconds on a VM, more than a whole awaited
// host call should. A thread that expects work within microseconds (an idle worker, or a slice
// whose guest awaits a host call: Engine::runSlice) may busy-wait with a pause instruction for at
// most kSpinNs, but only while a core is free for it beside the Node main thread: at most one
// spinner per core beyond the first, and none while guest slices occupy the other cores. Eight
// spinning guests therefore see no spinner at all. The Node main thread does the same for the
// executor's answer (EnvBridge::awaitReply in native/env_bridge.h) while a core is free for it.
//
// A watchdog answers evals stuck in a built-in that cannot be interrupted; the stuck thread stops
// counting against the cap, so capacity is kept.
#pragma once

#include <memory>

#include "engine.h"

namespace qjsn {

class Executor {
 public:
  // Process-wide; threads start on first use.
  static Executor& instance();
  void schedule(std::shared_ptr<Engine> engine);
  // Reads what the executor needs from the system (core count, environment) without starting a
  // thread: a helper process calls it before its filter closes /sys (native/helper/confine.cc).
  void prepare();

  struct Counts {
    int threads;     // executor threads running guest code (holding a turn) now
    int maxThreads;  // the cap on those
  };
  Counts counts();

  // Time slices, from a guest's interrupt poll (native/guest_budgets.cc). True when the calling
  // executor thread's guest has used its slice while others wait for a turn; cheap otherwise.
  // `markCpuNs`: the thread's CPU clock at the slice's first poll.
  bool sliceUsedUp(int64_t markCpuNs);
  // Hands the calling thread's turn over and sleeps until it comes back, or until `stop` (the
  // engine's stop flag) is set: a stopped guest unwinds at once. Returns at once when nobody waits.
  void handOver(const Engine* engine, const std::atomic<int>& stop);
  // A stop was requested for `engine`: wakes its thread if it sleeps in handOver.
  void stopRequested(const Engine* engine);

  // A spin slot for a thread about to busy-wait (see above). `inSlice`: the caller runs a slice
  // itself (it counts as a running slice). False: sleep instead. True: call endSpin() after.
  bool beginSpin(bool inSlice);
  void endSpin();
  static constexpr int64_t kSpinNs = 50 * 1000;
  // An idle worker whose spins found no work kSpinMissesBeforeSkips times in a row sleeps at once
  // for the next kSpinSkipsAfterMiss idle spells (a lone miss, e.g. a GC pause, costs nothing).
  static constexpr int kSpinMissesBeforeSkips = 2;
  // True when a core is free for the Node main thread beside the running guest slices, so it may
  // busy-wait for an executor's answer (EnvBridge::spinForReply) without taking CPU from a guest.
  bool mainMaySpin();

  // Bytes of stack each executor thread gets (address space; pages are committed as used);
  // maxStackSizeBytes must stay well below it.
  static constexpr size_t kThreadStackBytes = 16u << 20;
  // At most this many executor threads run guest code at once unless QJSN_EXECUTOR_THREADS says
  // otherwise (1..1024).
  static constexpr int kDefaultMaxThreads = 64;
  // Threads in all, parked ones included: past this, queued evals wait for a slice to end.
  static constexpr int kMaxThreads = 1024;
  // Threads beyond one per core exit after this long without work.
  static constexpr int64_t kIdleExitNs = 10 * 1000000000LL;
  // CPU time a slice may keep burning past its deadline (or a stop request) before the watchdog
  // calls it stuck.
  static constexpr int64_t kWatchdogGraceNs = 300 * 1000000LL;

  struct State;

 private:
  Executor();
  static void readSystem(State* st);
  State* state_;
};

}  // namespace qjsn
