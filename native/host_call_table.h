// The host calls of one sandbox's current eval: how many the guest made (sync and async), and the
// async ones in flight, each a call id the host answers with and the resolve/reject functions of
// the promise the guest holds for it. The guest's own thread (Engine::callHost, the slice that
// settles results) is the only one that changes it; the watchdog reads count().
//
//   callHost(async) --admit()--> add(): a call id --host result, a later slice--> take(): settled
//                      \--refused: the eval stops (HostCallLimit, CopyLimit)
//   clear(): the eval ended; results for calls it no longer waits for find nothing in take()
//
// Call ids grow for the sandbox's life, across evals: a late result for a call of an earlier eval
// never matches a call of the current one.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>

#include "boundary.h"
#include "qjs_raii.h"

namespace qjsn {

class HostCallTable {
 public:
  // `maxInFlight`: async calls one eval may have in flight (EngineOptions::maxHostCallsInFlight).
  explicit HostCallTable(uint64_t maxInFlight) : maxInFlight_(maxInFlight) {}

  struct PendingCall {
    OwnedValue resolve, reject;
  };

  // Counts a host call of the current eval. Only the guest's thread writes the count (the watchdog
  // reads it): no locked increment needed.
  void count() { calls_.store(calls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  uint32_t calls() const { return calls_.load(std::memory_order_relaxed); }
  // A new eval: no call made yet.
  void resetCount() { calls_.store(0, std::memory_order_relaxed); }

  // Whether one more async call may start: None, or why the eval must stop. Each call in flight
  // holds host-side state until it settles: capped in number (HostCallLimit), and counted against
  // the eval's copy budget while it lasts (CopyLimit, with `copiedBytes` already handed over).
  StopReason admit(uint64_t copiedBytes, uint64_t copyLimitBytes) const;
  // Records an async call whose promise `resolve` and `reject` settle; returns its call id.
  uint32_t add(OwnedValue resolve, OwnedValue reject);
  // Takes the call `callId` out of the table into `*out`; false when the eval no longer waits for it.
  bool take(uint32_t callId, PendingCall* out);
  bool noneInFlight() const { return pending_.empty(); }
  // Drops every call in flight (their promises with them).
  void clear() { pending_.clear(); }

 private:
  uint64_t maxInFlight_;
  std::unordered_map<uint32_t, PendingCall> pending_;
  uint32_t nextCallId_ = 1;
  std::atomic<uint32_t> calls_{0};
};

}  // namespace qjsn
