// EnvBridge's delivery of what executor threads posted (host calls, console lines, outcomes) to
// the handles of its environment (native/sandbox_handle.h), on the Node main thread, and its
// teardown with the environment.
#include <optional>
#include <utility>

#include "env_bridge.h"
#include "sandbox_handle.h"

namespace qjsn {

HostResult EnvBridge::runSyncCall(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t>& args) {
  auto it = handles_.find(sandboxId);
  if (it == handles_.end()) return closedResult();
  return *it->second->syncCall(fnId, args, nullptr);
}

bool EnvBridge::callSyncPrimitive(uint32_t sandboxId, PrimitiveCall* call) {
  if (lastPrimitiveCaller_.first != sandboxId) {
    auto it = handles_.find(sandboxId);
    if (it == handles_.end()) {
      call->fallback = closedResult();
      return false;
    }
    lastPrimitiveCaller_ = *it;
  }
  return lastPrimitiveCaller_.second->syncCallPrimitive(call);
}

HostResult EnvBridge::callSync(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t> args) {
  if (onMainThread()) return runSyncCall(sandboxId, fnId, args);
  SyncSlot slot;
  Message m;
  m.kind = Message::SyncCall;
  m.sandboxId = sandboxId;
  m.fnId = fnId;
  m.bytes = std::move(args);
  m.slot = &slot;
  post(std::move(m));
  std::unique_lock<std::mutex> lock(slot.mu);
  slot.cv.wait(lock, [&] { return slot.done; });
  return std::move(slot.result);
}

void EnvBridge::drain() {
  std::vector<Message> batch = std::move(spareBatch_);  // a nested drain finds none and makes its own
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(outbox_);
    hasMail_.store(false, std::memory_order_relaxed);
    signaled_.store(false, std::memory_order_relaxed);
  }
  // A host function that answers at once settles within this drain: its sandbox's next call must
  // wait for this batch (call order), and the stack must not grow per call (collectNextCall).
  bool outer = !std::exchange(draining_, true);
  Napi::HandleScope scope(env_);
  for (Message& m : batch) {
    auto it = handles_.find(m.sandboxId);
    if (m.kind == Message::SyncCall) {
      std::optional<HostResult> r = it == handles_.end() ? closedResult() : it->second->syncCall(m.fnId, m.bytes, m.slot);
      if (r) finishSlot(m.slot, std::move(*r));
      continue;
    }
    if (it == handles_.end()) continue;
    if (m.kind == Message::AsyncCall) it->second->hostCall(m.fnId, m.callId, m.evalId, m.bytes);
    else if (m.kind == Message::Console) it->second->consoleLine(m.fnId, m.evalId, m.bytes);
    else it->second->completeEval(m.outcome);
  }
  if (outer) draining_ = false;
  batch.clear();
  // Kept unless a flood of messages made it large (a message is a few hundred bytes).
  if (batch.capacity() > spareBatch_.capacity() && batch.capacity() <= kSpareBatchMessages)
    spareBatch_ = std::move(batch);
}

void EnvBridge::closeAll() {
  std::vector<Message> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    batch.swap(outbox_);
    hasMail_.store(false, std::memory_order_relaxed);
  }
  for (Message& m : batch)
    if (m.slot) finishSlot(m.slot, closedResult());
  auto handles = handles_;
  for (auto& [id, h] : handles) h->release();
  tsfn_.Release();
}

}  // namespace qjsn
