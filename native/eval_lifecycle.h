// The lifecycle of one sandbox's evals: which thread may enter the runtime, and what happens to a
// host result, a stop or a dispose that arrives meanwhile. Engine holds its mutex around every
// apply(); the phase is also readable without it (busy(), broken(), the guest's own thread).
//
//     Idle --BeginSync--> SyncRunning --EndSync--> Idle, or Closed if a dispose came
//
//     Idle --BeginAsync--> Starting --SliceStarted--> Running --SliceFinished--> Idle, or Closed if
//                                                     |  ^  \                     a dispose came
//                                        SliceParked  |  |   \ SliceRequeued (results or a stop
//                                                     v  |    v                came meanwhile)
//                                                Parked  +--- Queued
//                                                     |  SliceStarted  ^
//                                                     +----------------+
//                                   HostResultArrived, StopRequested, DisposeRequested
//
//     Running --Abandon--> Abandoned --SliceParked/Requeued/Finished--> Broken (runtime freed)
//     Idle --DisposeRequested--> Closed (runtime freed)
//
//   Every event not drawn leaves the phase as it is: a host result, stop or dispose for an eval
//   that is starting, queued, running or abandoned is picked up by its next slice (or dropped with
//   it); requests in a phase that cannot take them are refused (see Event).
//   Idle with a synchronous host call in flight is busy too: see inHostCall_.
//   Broken and Closed are terminal: nothing enters the runtime again.
//
// Who applies what (all under Engine::mu_):
//   main thread     BeginSync, EndSync (evalSync); BeginAsync, HostResultArrived (deliver),
//                   StopRequested (requestStop), DisposeRequested (dispose)
//   slice thread    SliceStarted, SliceParked, SliceRequeued, SliceFinished (runSlice: an executor
//                   thread, or the main thread for inline evals)
//   guest thread    HostCallStarted, HostCallEnded (callHost, around a synchronous host call)
//   watchdog        Abandon (abandon)
#pragma once

#include <atomic>
#include <cstdint>

namespace qjsn {

class EvalLifecycle {
 public:
  enum class Phase : uint8_t {
    Idle,         // no eval: the main thread may enter the runtime
    SyncRunning,  // evalSync runs guest code on the main thread
    Starting,     // an async eval was accepted; its first slice has not begun
    Queued,       // an async eval has host results or a stop to act on and waits for a slice
    Running,      // a slice of an async eval runs (an executor thread, or the main thread inline)
    Parked,       // an async eval waits for host results; no thread holds it
    Abandoned,    // the watchdog answered the running slice; the slice has not returned yet
    Broken,       // the abandoned slice returned and the runtime was freed (terminal)
    Closed,       // disposed and the runtime freed (terminal)
  };

  enum class Event : uint8_t {
    // Requests: a refusal is an ordinary answer ("busy", "nothing to run", "too late").
    BeginSync,          // evalSync wants the runtime (main thread)
    BeginAsync,         // beginAsync wants to start an eval (main thread)
    HostResultArrived,  // deliver(): refused once the eval ended (the result is dropped)
    StopRequested,      // requestStop(): refused once the eval ended
    SliceStarted,       // runSlice(): refused when nothing is queued
    Abandon,            // the watchdog gives up on a slice: refused unless an async slice runs
    // Facts: the engine's own code guarantees they are possible, so a refusal is a bug.
    EndSync,           // evalSync is done
    SliceParked,       // the slice ends; the eval waits for host results
    SliceRequeued,     // the slice ends; results or a stop arrived while it ran
    SliceFinished,     // the slice ends with the eval's outcome
    DisposeRequested,  // dispose(): frees the runtime now if nothing runs it, else when it stops
    HostCallStarted,   // guest code calls a synchronous host function
    HostCallEnded,
  };

  // Moves to the next phase for `event`. False, changing nothing, when the event is not possible
  // in this phase: for a request that is the answer; for a fact it is a bug, which asserts in
  // debug builds and is reported by the caller as a typed error in release builds.
  [[nodiscard]] bool apply(Event event);

  Phase phase() const { return phase_.load(std::memory_order_relaxed); }
  // No eval and no host call: the main thread may use the runtime (globals, snapshots, clock).
  bool idle() const { return phase() == Phase::Idle && !inHostCall(); }
  // An eval or a host call holds the runtime. The terminal phases hold nothing.
  bool busy() const;
  bool broken() const { return phase() == Phase::Abandoned || phase() == Phase::Broken; }
  bool syncRunning() const { return phase() == Phase::SyncRunning; }
  bool inHostCall() const { return inHostCall_.load(std::memory_order_relaxed); }

 private:
  // The phase after `event`, or false when the event is not possible now.
  bool next(Event event, Phase* to) const;
  static bool isRequest(Event event) { return event <= Event::Abandon; }

  std::atomic<Phase> phase_{Phase::Idle};
  // Orthogonal to the phase, so fields rather than more phases:
  // - a synchronous host call runs on top of guest code in SyncRunning, Running and Abandoned, and
  //   in Idle while a main-thread readSnapshot re-creates functions; the main thread must not
  //   enter the runtime meanwhile (the host function might try).
  std::atomic<bool> inHostCall_{false};
  // - a dispose that arrived while an eval (or a host call) held the runtime: the runtime is freed
  //   when the eval ends, whichever phase it passes through until then.
  bool disposeRequested_ = false;
};

}  // namespace qjsn
