// The host-call table (native/host_call_table.h): admission, ids and settling of async calls.
#include "host_call_table.h"

#include <utility>

namespace qjsn {

StopReason HostCallTable::admit(uint64_t copiedBytes, uint64_t copyLimitBytes) const {
  if (pending_.size() >= maxInFlight_) return StopReason::HostCallLimit;
  if (copiedBytes + (pending_.size() + 1) * boundary::hostCallStateBytes > copyLimitBytes) return StopReason::CopyLimit;
  return StopReason::None;
}

uint32_t HostCallTable::add(OwnedValue resolve, OwnedValue reject) {
  uint32_t callId = nextCallId_++;
  PendingCall& call = pending_[callId];
  call.resolve = std::move(resolve);
  call.reject = std::move(reject);
  return callId;
}

bool HostCallTable::take(uint32_t callId, PendingCall* out) {
  auto it = pending_.find(callId);
  if (it == pending_.end()) return false;
  *out = std::move(it->second);
  pending_.erase(it);
  return true;
}

}  // namespace qjsn
