#include "eval_lifecycle.h"

#include <cassert>

namespace qjsn {

using Phase = EvalLifecycle::Phase;
using Event = EvalLifecycle::Event;

bool EvalLifecycle::busy() const {
  switch (phase()) {
    case Phase::Idle:
    case Phase::Broken:
    case Phase::Closed: return inHostCall();
    default: return true;
  }
}

bool EvalLifecycle::next(Event event, Phase* to) const {
  Phase from = phase();
  *to = from;
  bool runsGuest = from == Phase::Idle || from == Phase::SyncRunning || from == Phase::Running || from == Phase::Abandoned;
  bool evalActive = from != Phase::Idle && from != Phase::Broken && from != Phase::Closed;
  switch (event) {
    case Event::BeginSync:
      if (!idle()) return false;
      *to = Phase::SyncRunning;
      return true;
    case Event::BeginAsync:
      if (!idle()) return false;
      *to = Phase::Starting;
      return true;
    case Event::StopRequested:
      // A stop names an async eval; an evalSync running now is another eval (it is stopped by
      // its own budget), so a late stop for the last async eval must not reach it.
      if (from == Phase::SyncRunning) return false;
      [[fallthrough]];
    case Event::HostResultArrived:
      if (!evalActive) return false;
      if (from == Phase::Parked) *to = Phase::Queued;
      return true;
    case Event::SliceStarted:
      if (from != Phase::Starting && from != Phase::Queued) return false;
      *to = Phase::Running;
      return true;
    case Event::Abandon:
      if (from != Phase::Running) return false;
      *to = Phase::Abandoned;
      return true;
    case Event::EndSync:
      if (from != Phase::SyncRunning) return false;
      *to = disposeRequested_ ? Phase::Closed : Phase::Idle;
      return true;
    case Event::SliceParked:
    case Event::SliceRequeued:
    case Event::SliceFinished:
      if (from == Phase::Abandoned) {
        *to = Phase::Broken;
        return true;
      }
      if (from != Phase::Running) return false;
      *to = event == Event::SliceParked     ? Phase::Parked
            : event == Event::SliceRequeued ? Phase::Queued
            : disposeRequested_             ? Phase::Closed
                                            : Phase::Idle;
      return true;
    case Event::DisposeRequested:
      if (idle()) *to = Phase::Closed;
      else if (from == Phase::Parked) *to = Phase::Queued;
      return true;
    case Event::HostCallStarted: return runsGuest && !inHostCall();
    case Event::HostCallEnded: return runsGuest && inHostCall();
  }
  return false;
}

bool EvalLifecycle::apply(Event event) {
  Phase to;
  if (!next(event, &to)) {
    // Only requests may be refused; a refused fact means the engine lost track of its own state.
    assert(isRequest(event) && "impossible eval lifecycle transition");
    return false;
  }
  if (event == Event::DisposeRequested) disposeRequested_ = true;
  if (event == Event::HostCallStarted) inHostCall_.store(true, std::memory_order_relaxed);
  if (event == Event::HostCallEnded) inHostCall_.store(false, std::memory_order_relaxed);
  phase_.store(to, std::memory_order_relaxed);
  return true;
}

}  // namespace qjsn
