// Async evals: accepting one, the host results, stops and disposes that reach it, its slices on an
// executor thread (or inline on the main thread), and the watchdog's last resort. Every change of
// phase goes through lifecycle_ (native/eval_lifecycle.h, where the diagram is).
#include "engine.h"
#include "executor.h"

namespace qjsn {

using Phase = EvalLifecycle::Phase;
using Event = EvalLifecycle::Event;

void Engine::lifecycleFault(EvalOutcome* out) {
  JobKind kind = out->kind;
  *out = EvalOutcome();
  out->kind = kind;
  out->status = EvalStatus::Broken;
  out->message = "internal error: the sandbox lost track of its eval state";
}

void Engine::snapshotAfterEval(EvalOutcome* out) {
  switch (out->status) {
    // A stopped eval may have left the state half-changed: nothing is written of it.
    case EvalStatus::Timeout:
    case EvalStatus::OutOfMemory:
    case EvalStatus::Aborted:
    case EvalStatus::Disposed:
    case EvalStatus::Broken:
    case EvalStatus::Busy: break;
    default: {
      // After finish(), as a snapshot job queued behind the eval would run: the eval's jobs and
      // state are cleared, its numbers taken. Writing runs no guest code: no budget applies.
      std::unique_lock<std::mutex> lock(mu_);
      writingAfterEval_ = true;
      lock.unlock();
      out->snapshot = writeSnapshot(request_.snapshotExclude, request_.snapshotMaxBytes, &out->snapshotBody);
      lock.lock();
      writingAfterEval_ = false;
    }
  }
  request_.snapshotExclude.clear();
}

bool Engine::beginAsync(EvalRequest request, uint64_t evalId) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ctx_ || !lifecycle_.apply(Event::BeginAsync)) return false;
  request_ = std::move(request);
  stop_.store(0);
  stopRequestedNs_ = 0;
  pendingEvalId_ = evalId;
  return true;
}

bool Engine::deliver(HostResult result) {
  std::lock_guard<std::mutex> lock(mu_);
  bool parked = lifecycle_.phase() == Phase::Parked;
  if (!lifecycle_.apply(Event::HostResultArrived)) return false;  // the eval ended: a late result is dropped
  inbox_.push_back(std::move(result));
  inboxReady_.store(true, std::memory_order_release);
  return parked;
}

bool Engine::requestStop(StopReason reason, uint64_t evalId) {
  std::lock_guard<std::mutex> lock(mu_);
  if (evalId != pendingEvalId_ || writingAfterEval_) return false;
  bool parked = lifecycle_.phase() == Phase::Parked;
  if (!lifecycle_.apply(Event::StopRequested)) return false;  // the eval ended
  int expected = 0;
  if (stop_.compare_exchange_strong(expected, static_cast<int>(reason))) stopRequestedNs_ = monotonicNs();
  return parked;
}

bool Engine::startJob(EvalOutcome* out, bool* entered) {
  resetEvalCounters(pendingEvalId_);
  if (stop_.load() != 0) {
    classifyException(JS_UNDEFINED, out);
    *entered = false;
    return true;
  }
  if (!enterGuest(request_.executionBudgetMs)) {
    out->status = EvalStatus::StackOverflow;
    out->message = stackRefusal();
    leaveGuest();
    return true;
  }
  switch (request_.kind) {
    case JobKind::WriteSnapshot: return writeSnapshotJob(out);
    case JobKind::ReadSnapshot: return readSnapshotJob(out);
    case JobKind::Eval:
    case JobKind::EvalThenSnapshot:
    case JobKind::Count: break;
  }
  return !startEval(out);
}

bool Engine::startEval(EvalOutcome* out) {
  if (!compileAndStart(request_, out)) {
    leaveGuest();  // stop the clock: the execution time counts in the outcome
    return false;
  }
  drainJobs();
  return true;
}

bool Engine::writeSnapshotJob(EvalOutcome* out) {
  leaveGuest();  // writing runs no guest code: no execution budget applies
  out->snapshot = writeSnapshot(request_.snapshotExclude, request_.snapshotMaxBytes, &out->snapshotBody);
  request_.snapshotExclude.clear();
  return true;
}

bool Engine::readSnapshotJob(EvalOutcome* out) {
  out->snapshot = readSnapshotEntered(request_.snapshotBody.data(), request_.snapshotBody.size());
  request_.snapshotBody = std::vector<uint8_t>();
  leaveGuest();
  return true;
}

void Engine::resumeEval(std::vector<HostResult>* results) {
  enterGuest(request_.executionBudgetMs);
  settleHostCalls(results);
  drainJobs();
}

bool Engine::runSlice() {
  std::vector<HostResult> results;
  bool firstSlice;
  {
    std::lock_guard<std::mutex> lock(mu_);
    firstSlice = lifecycle_.phase() == Phase::Starting;
    if (!lifecycle_.apply(Event::SliceStarted)) return false;  // nothing queued
    sliceCpuClock_ = CpuClock::ofCurrentThread();
    overdueCpuNs_ = -1;
    results.swap(inbox_);
    inboxReady_.store(false, std::memory_order_relaxed);
  }
  EvalOutcome out;
  out.kind = request_.kind;
  bool entered = true;
  bool done = false;
  if (firstSlice) done = startJob(&out, &entered);
  else resumeEval(&results);
  while (true) {
    // Also when the first slice ended the eval (a budget stop, a throw): its time counts.
    if (entered) leaveGuest();
    if (!done) {
      if (stop_.load() != 0) {
        classifyException(JS_UNDEFINED, &out);
        done = true;
      } else if (settled(&out)) {
        done = true;
      } else if (hostCalls_.noneInFlight()) {
        neverSettles("the script awaits a promise that can never settle (no host call is pending)", &out);
        done = true;
      }
    }
    // The guest awaits a host call whose answer usually comes back within microseconds: waiting
    // for it here, when a core is free, saves parking and the futex wake-up of a sleeping worker.
    // A wait that missed (a slow host function, a busy event loop) makes the next few waits sleep
    // at once, so a miss costs little CPU overall.
    bool answered = false;
    if (!done && stop_.load() == 0 && !inboxReady_.load(std::memory_order_acquire) && !bridge_->onMainThread()) {
      if (spinSkips_ > 0) {
        spinSkips_--;
      } else if (Executor::instance().beginSpin(true)) {
        answered = spinUntil(Executor::kSpinNs, [this] {
          return inboxReady_.load(std::memory_order_acquire) || stop_.load(std::memory_order_relaxed) != 0;
        });
        Executor::instance().endSpin();
        if (!answered) spinSkips_ = kSpinSkipsAfterMiss;
      }
    }
    // The answer came while this thread waited for it: the guest goes on in this slice, without
    // ending it and queueing the engine for the next one (two lifecycle steps and a trip through
    // the executor's queue per awaited call).
    if (!answered || stop_.load() != 0) break;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lifecycle_.phase() != Phase::Running) break;  // the watchdog gave up on this slice
      results.clear();
      results.swap(inbox_);
      inboxReady_.store(false, std::memory_order_relaxed);
      overdueCpuNs_ = -1;
    }
    resumeEval(&results);
    entered = true;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (done && lifecycle_.phase() != Phase::Abandoned) {
    lock.unlock();
    finish(&out);
    if (request_.kind == JobKind::EvalThenSnapshot) snapshotAfterEval(&out);
    lock.lock();
  }
  bool again = !done && (!inbox_.empty() || stop_.load() != 0);  // results or a stop arrived meanwhile
  if (!lifecycle_.apply(done ? Event::SliceFinished : again ? Event::SliceRequeued : Event::SliceParked)) {
    lifecycleFault(&out);
    out.evalId = evalId_;
    lock.unlock();
    bridge_->postEvalDone(id_, std::move(out));
    return false;
  }
  switch (lifecycle_.phase()) {
    case Phase::Queued: return true;
    case Phase::Parked: return false;
    case Phase::Broken:
      // The watchdog already answered this eval; nobody waits for it and nothing runs here again.
      lock.unlock();
      teardown();
      return false;
    default: break;  // Idle, or Closed when a dispose came during the eval
  }
  bool disposed = lifecycle_.phase() == Phase::Closed;
  lock.unlock();
  bridge_->postEvalDone(id_, std::move(out));
  if (disposed) teardown();
  return false;
}

bool Engine::abandon(int64_t graceNs) {
  std::lock_guard<std::mutex> lock(mu_);
  // Only an async slice can be abandoned, and not while it writes a snapshot after its eval.
  if (lifecycle_.phase() != Phase::Running || writingAfterEval_) return false;
  // Stuck means "kept burning CPU after it should have stopped": a thread that merely got no CPU
  // (a loaded machine, or a sanitizer build) is not stuck, so everything here is the thread's own
  // CPU time, like the budget itself.
  // A slice that never polled the interrupt handler (a built-in that ignores it) has no CPU mark:
  // it is judged overdue by wall time, then stuck by CPU time as well.
  int64_t cpuNs = sliceCpuClock_.nowNs();
  if (cpuNs < 0) return false;
  BudgetClock::Deadlines deadlines = clock_.deadlines();
  int64_t nowNs = monotonicNs();
  bool overdue = deadlines.passed(cpuNs, nowNs) || (stop_.load() != 0 && stopRequestedNs_ != 0);
  if (!overdue) {
    overdueCpuNs_ = -1;
    return false;
  }
  if (overdueCpuNs_ < 0) {
    overdueCpuNs_ = cpuNs;
    return false;
  }
  if (cpuNs - overdueCpuNs_ < graceNs) return false;
  if (!lifecycle_.apply(Event::Abandon)) return false;
  EvalOutcome out;
  out.status = EvalStatus::Timeout;
  out.stop = stop_.load() != 0 ? static_cast<StopReason>(stop_.load()) : StopReason::ExecutionBudget;
  if (out.stop == StopReason::Abort) out.status = EvalStatus::Aborted;
  if (out.stop == StopReason::Dispose) out.status = EvalStatus::Disposed;
  out.message = "the guest is stuck in a built-in that cannot be interrupted; the sandbox is broken";
  out.evalId = pendingEvalId_;
  out.kind = request_.kind;
  out.executionMs = clock_.executionMs() + static_cast<double>(deadlines.sliceNs(cpuNs, nowNs)) / 1e6;
  out.hostCalls = hostCalls_.calls();
  out.memoryUsedBytes = memoryUsed();
  out.peakMemoryBytes = memoryPeak();
  bridge_->postEvalDone(id_, std::move(out));
  return true;
}

}  // namespace qjsn
