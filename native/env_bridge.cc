// EnvBridge's hand-over between executor threads and the Node main thread: posting to the outbox,
// the main thread's waits for an executor's answer, delivery of what was posted (host calls,
// console lines, outcomes) to the handles of its environment (native/sandbox_handle.h), and its
// teardown with the environment.
//
// Memory orderings. The outbox (outbox_, closed_), the expected outcome (expected_) and the skipped
// wait (skippedWait_) are guarded by mu_. Four atomics let the main thread wait for them without
// taking mu_ on every turn of a spin; all four are written under mu_ (waitWouldHaveHit_ excepted,
// see below), and every read without mu_ is the main thread's:
//   signaled_          true: the loop was woken (or is being woken, or the main thread holds the
//                      wake-up in collectNextCall) and has not drained the outbox yet. An executor
//                      sets it in post: release. The main thread's own stores (drain, takeOutcome,
//                      collectNextCall) are relaxed: a thread sees its own writes in order. Read
//                      without mu_ by awaitReply's spin: acquire.
//   hasMail_           the outbox is not empty. post: release; the main thread's stores (drain,
//                      takeOutcome, closeAll): relaxed. Read without mu_ by the spins of
//                      collectNextCall and takeOutcome: acquire; by takeOutcome's excuse for a
//                      missed wait: relaxed (a hint for the spin policy only).
//   outcomeHere_       the outcome expectOutcome named is in the outbox. post: release;
//                      expectOutcome (main thread): relaxed. Read by takeOutcome's spin: acquire.
//   waitWouldHaveHit_  a hint for the spin policy: an outcome whose wait was skipped came within a
//                      wait's length (post, under mu_), so the skips end (spinForReply, main thread,
//                      without mu_). Relaxed everywhere: it publishes nothing, and a stale value
//                      costs one wait more or less, never a message.
// What makes the messages themselves visible is mu_, not these orderings: a waiter that sees a
// flag set takes mu_ (collectNextCall, takeOutcome) or returns to the loop, whose drain takes it,
// before it touches the outbox. The release/acquire pairs make a flag read without the lock imply
// the post that set it is complete, at no cost on x86-64 (plain loads and stores) and one ordered
// access on Arm. No wake-up can be lost, because each decision about one is taken under mu_: post
// decides whether to wake the loop while it holds mu_, and a waiter that gives up re-reads the
// outbox and resets signaled_ under mu_ (collectNextCall), or wakes the loop itself for what is
// left (takeOutcome). The main thread's own counters (replySpinSkips_, draining_) are not shared.
#include <algorithm>
#include <optional>
#include <utility>

#include "env_bridge.h"
#include "sandbox_handle.h"

namespace qjsn {

void EnvBridge::postAsyncCall(uint32_t sandboxId, uint64_t evalId, uint32_t callId, uint32_t fnId,
                              std::vector<uint8_t> args) {
  Message m;
  m.kind = Message::AsyncCall;
  m.sandboxId = sandboxId;
  m.evalId = evalId;
  m.callId = callId;
  m.fnId = fnId;
  m.bytes = std::move(args);
  post(std::move(m));
}

void EnvBridge::postConsole(uint32_t sandboxId, uint64_t evalId, int level, std::vector<uint8_t> args) {
  Message m;
  m.kind = Message::Console;
  m.sandboxId = sandboxId;
  m.evalId = evalId;
  m.fnId = static_cast<uint32_t>(level);
  m.bytes = std::move(args);
  post(std::move(m));
}

void EnvBridge::postEvalDone(uint32_t sandboxId, EvalOutcome outcome) {
  Message m;
  m.kind = Message::EvalDone;
  m.sandboxId = sandboxId;
  m.outcome = std::move(outcome);
  post(std::move(m));
}

void EnvBridge::post(Message m) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      if (m.slot) finishSlot(m.slot, closedResult());
      return;
    }
    // The outcome the main thread is waiting for (takeOutcome) needs no wake-up.
    bool expected = m.kind == Message::EvalDone && m.sandboxId == expected_.first && m.outcome.evalId == expected_.second;
    // An outcome whose wait was skipped (spinForReply) but that came within a wait's length: the
    // miss that started the skips was a passing delay (a GC pause, a preempted thread). Skipping
    // on would send evals that end within microseconds through the loop, whose slow hand-overs
    // also make the executor's spins for the next eval miss.
    if (m.kind == Message::EvalDone && m.sandboxId == skippedWait_.sandboxId && m.outcome.evalId == skippedWait_.evalId) {
      if (std::chrono::steady_clock::now() - skippedWait_.at < std::chrono::nanoseconds(kReplySpinNs))
        waitWouldHaveHit_.store(true, std::memory_order_relaxed);
      skippedWait_ = {};
    }
    // The main thread posts only from inline slices, and drains right after each (runInline).
    wake = !expected && !signaled_.load(std::memory_order_relaxed) && !onMainThread();
    if (wake) signaled_.store(true, std::memory_order_release);
    outbox_.push_back(std::move(m));
    hasMail_.store(true, std::memory_order_release);
    if (expected) outcomeHere_.store(true, std::memory_order_release);
  }
  if (wake) wakeLoop();
}

void EnvBridge::wakeLoop() {
  auto self = shared_from_this();
  tsfn_.NonBlockingCall([self](Napi::Env, Napi::Function) { self->drain(); });
}

template <typename Ready, typename Excused>
void EnvBridge::spinForReply(Ready ready, Excused excused) {
  if (ready()) return;
  if (replySpinSkips_ > 0) {
    if (!waitWouldHaveHit_.exchange(false, std::memory_order_relaxed)) {
      replySpinSkips_--;
      return;
    }
    replySpinSkips_ = 0;
  }
  if (!Executor::instance().mainMaySpin()) return;
  if (!spinUntil(kReplySpinNs, ready) && !excused()) {
    replySpinSkips_ = kSpinSkipsAfterMiss;
    waitWouldHaveHit_.store(false, std::memory_order_relaxed);
  }
}

void EnvBridge::awaitReply() {
  spinForReply([this] { return signaled_.load(std::memory_order_acquire); }, [] { return false; });
}

bool EnvBridge::collectNextCall() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (draining_ || signaled_.load(std::memory_order_relaxed)) {  // the loop comes for them
      lock.unlock();
      awaitReply();
      return false;
    }
    signaled_.store(true, std::memory_order_relaxed);
    if (hasMail_.load(std::memory_order_relaxed)) return true;
  }
  spinForReply([this] { return hasMail_.load(std::memory_order_acquire); }, [] { return false; });
  std::lock_guard<std::mutex> lock(mu_);
  if (hasMail_.load(std::memory_order_relaxed)) return true;
  signaled_.store(false, std::memory_order_relaxed);  // nothing came: a later post wakes the loop
  return false;
}

void EnvBridge::expectOutcome(uint32_t sandboxId, uint64_t evalId) {
  std::lock_guard<std::mutex> lock(mu_);
  expected_ = {sandboxId, evalId};
  outcomeHere_.store(false, std::memory_order_relaxed);
}

std::optional<EvalOutcome> EnvBridge::takeOutcome(const Engine& engine) {
  // Any message ends the wait: one posted before the outcome (a host call, a console line) keeps
  // it from being taken here anyway, and the loop must come for it.
  auto arrived = [this] {
    return outcomeHere_.load(std::memory_order_acquire) || hasMail_.load(std::memory_order_acquire);
  };
  bool skipsWait = replySpinSkips_ > 0 && !arrived();
  // A sleeping worker's wake-up (43 us median on a 2-core VM) outlasts the reply spin: the outcome
  // then went through the loop, the next eval came too late for the worker's spin, and whole
  // batches stayed that slow. Wait for the slice to begin first (at most kSliceStartSpinNs of
  // the main thread, only while a core is free for it), so the spin below covers the slice only.
  if (!skipsWait && Executor::instance().mainMaySpin())
    spinUntil(kSliceStartSpinNs, [&] { return arrived() || !engine.awaitingSlice(); });
  spinForReply(arrived, [&] { return engine.awaitingSlice() || hasMail_.load(std::memory_order_relaxed); });
  std::optional<EvalOutcome> taken;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [sandboxId, evalId] = expected_;
    expected_ = {};
    // Watch the outcome this skipped wait left to the loop (see post).
    if (skipsWait && !outcomeHere_.load(std::memory_order_relaxed))
      skippedWait_ = {sandboxId, evalId, std::chrono::steady_clock::now()};
    if (outcomeHere_.load(std::memory_order_relaxed)) {
      auto first = std::find_if(outbox_.begin(), outbox_.end(),
                                [&](const Message& m) { return m.sandboxId == sandboxId; });
      if (first != outbox_.end() && first->kind == Message::EvalDone) {
        taken = std::move(first->outcome);
        outbox_.erase(first);
        hasMail_.store(!outbox_.empty(), std::memory_order_relaxed);
      }
    }
    // An outcome left in the outbox was not announced: the loop must come for it.
    wake = !outbox_.empty() && !signaled_.load(std::memory_order_relaxed);
    if (wake) signaled_.store(true, std::memory_order_relaxed);
  }
  if (wake) wakeLoop();
  return taken;
}

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
