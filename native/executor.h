// Threads owned by the addon that run async evals. Never the libuv pool, which serves Node's own
// I/O. Each engine is entered by one thread at a time.
//
// Fairness: QuickJS cannot set aside a running guest's C stack, so the unit the system can preempt
// is a thread. Every runnable eval gets a thread of its own, created on demand up to a cap
// (kDefaultMaxThreads, or QJSN_EXECUTOR_THREADS), and the OS time-slices them: a guest spinning
// in `while (true) {}` cannot hold back a ready eval of another session. Budgets count the
// thread's own CPU time (native/threads.h), so waiting for a core never uses up a budget. Past the
// cap, evals wait in call order. Threads run at a lower priority than the Node event loop.
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

  struct Counts {
    int threads;     // executor threads that count against the cap
    int maxThreads;  // the cap
  };
  Counts counts();

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
  // At most this many executor threads unless QJSN_EXECUTOR_THREADS says otherwise (1..1024).
  static constexpr int kDefaultMaxThreads = 64;
  // Threads beyond one per core exit after this long without work.
  static constexpr int64_t kIdleExitNs = 10 * 1000000000LL;
  // CPU time a slice may keep burning past its deadline (or a stop request) before the watchdog
  // calls it stuck.
  static constexpr int64_t kWatchdogGraceNs = 300 * 1000000LL;

  struct State;

 private:
  Executor();
  State* state_;
};

}  // namespace qjsn
