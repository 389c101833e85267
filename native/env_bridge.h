// The main-thread side of every sandbox of one Node environment: the outbox that carries host
// calls and finished evals from executor threads to the Node event loop, the buffers shared with
// src/ (exchange, inline-eval stats), and the handles that messages are delivered to
// (native/sandbox_handle.h; native/env_bridge.cc delivers to them).
#pragma once

#include <napi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine.h"
#include "executor.h"
#include "js_convert.h"
#include "threads.h"

namespace qjsn {

class SandboxHandle;

// One per Node environment (main thread or worker).
class EnvBridge : public HostBridge, public std::enable_shared_from_this<EnvBridge> {
 public:
  EnvBridge(Napi::Env env) : env_(env), mainThread_(std::this_thread::get_id()) {}

  void start() {
    Napi::Float64Array stats = Napi::Float64Array::New(env_, kStatsSlots);
    statsData_ = stats.Data();
    stats_ = Napi::Persistent(stats);
    Napi::Float64Array primitiveSlots = Napi::Float64Array::New(env_, kPrimitiveSlots);
    primitiveSlotsData_ = primitiveSlots.Data();
    primitiveSlots_ = Napi::Persistent(primitiveSlots);
    Napi::Float64Array request = Napi::Float64Array::New(env_, kRequestSlots);
    requestData_ = request.Data();
    request_ = Napi::Persistent(request);
    Napi::Float64Array createSlots = Napi::Float64Array::New(env_, kCreateSlots);
    createData_ = createSlots.Data();
    createSlots_ = Napi::Persistent(createSlots);
    Napi::Float64Array callSlots = Napi::Float64Array::New(env_, kCallSlots);
    callData_ = callSlots.Data();
    callSlots_ = Napi::Persistent(callSlots);
    Napi::Buffer<uint8_t> exchange = Napi::Buffer<uint8_t>::New(env_, kExchangeBytes);
    exchangeData_ = exchange.Data();  // stable: the persistent reference keeps the buffer alive
    exchange_ = Napi::Persistent(exchange);
    tsfn_ = Napi::ThreadSafeFunction::New(env_, Napi::Function::New(env_, [](const Napi::CallbackInfo&) {}),
                                          "quickjs-native", 0, 1);
    tsfn_.Unref(env_);
  }

  bool onMainThread() const override { return std::this_thread::get_id() == mainThread_; }

  // Where an executor thread waits for the answer to a sync host call.
  struct SyncSlot {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    HostResult result;
  };
  static void finishSlot(SyncSlot* slot, HostResult r) {
    std::lock_guard<std::mutex> lock(slot->mu);
    slot->result = std::move(r);
    slot->done = true;
    slot->cv.notify_one();
  }

  HostResult callSync(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t> args) override;
  bool callSyncPrimitive(uint32_t sandboxId, PrimitiveCall* call) override;
  void postAsyncCall(uint32_t sandboxId, uint64_t evalId, uint32_t callId, uint32_t fnId, std::vector<uint8_t> args) override;
  void postConsole(uint32_t sandboxId, uint64_t evalId, int level, std::vector<uint8_t> args) override;
  void postEvalDone(uint32_t sandboxId, EvalOutcome outcome) override;

  // Main thread only.
  void registerHandle(uint32_t id, SandboxHandle* h) { handles_[id] = h; }
  // The live (not disposed) handle of sandbox `id`, or null.
  SandboxHandle* handleOf(uint32_t id) const {
    auto it = handles_.find(id);
    return it == handles_.end() ? nullptr : it->second;
  }
  void unregisterHandle(uint32_t id) {
    handles_.erase(id);
    if (lastPrimitiveCaller_.first == id) lastPrimitiveCaller_ = {};
  }
  void evalStarted() {
    if (activeEvals_++ == 0) tsfn_.Ref(env_);
  }
  void evalEnded() {
    if (--activeEvals_ == 0) tsfn_.Unref(env_);
  }
  uint32_t nextSandboxId() { return ++lastSandboxId_; }

  // --- waiting for executors (native/env_bridge.cc, where the memory orderings are) -------------
  // The main-side twin of the executor spin (native/executor.h). The main thread just handed an
  // executor work that is usually answered within microseconds (an eval scheduled, a host result
  // settled). If it returned to the event loop now, the loop would go to sleep and the answer would
  // have to wake it. Instead it busy-waits up to kReplySpinNs for the answer to be posted, while a
  // core is free beside the running guests; the loop then finds the answer ready without sleeping.
  // A wait that missed (a long eval, a slow host function) makes the next kSpinSkipsAfterMiss
  // hand-overs return at once, so a miss costs little CPU overall.
  void awaitReply();
  // A host result was just handed to an executor whose guest goes on in the same slice, and usually
  // makes its next host call within microseconds. Waits for it as awaitReply does, but holds the
  // loop's wake-up (signaled_) meanwhile, so that the executor posts it without a thread-safe
  // function call, and the main thread takes it from the outbox itself: one hand-over per awaited
  // call instead of two. True: messages wait, and the caller must drain() them now.
  bool collectNextCall();

  // The eval `evalId` of sandbox `sandboxId` is about to be handed to an executor, and its caller
  // can take the outcome at once (takeOutcome): the outcome is then not announced to the loop.
  void expectOutcome(uint32_t sandboxId, uint64_t evalId);
  // Waits for the expected outcome as awaitReply does. Returns it when it came and nothing of its
  // sandbox waits before it in the outbox (console lines, host calls: they are dispatched first,
  // by drain), which spares the answer a wake-up and a turn of the event loop. Otherwise the
  // outcome reaches its handle through drain, as any message does. A wait that ended before any
  // thread began the eval (`engine.awaitingSlice()`: a sleeping worker's wake-up is slow on a VM) says
  // nothing about the eval's length and makes the next waits no shorter. Main thread.
  std::optional<EvalOutcome> takeOutcome(const Engine& engine);

  // The buffer shared with src/sandbox.ts for host call arguments and results (main thread only;
  // every use is a synchronous write-then-read).
  static constexpr size_t kExchangeBytes = boundary::exchangeBytes;
  Napi::Buffer<uint8_t> exchange() { return exchange_.Value(); }
  // Numbers of the last eval answered on the spot (SandboxHandle::answerHere), shared with src/outcomes.ts.
  Napi::Float64Array statsArray() { return stats_.Value(); }
  double& stat(StatsSlot slot) { return statsData_[static_cast<uint32_t>(slot)]; }
  // The numbers of a primitive host call (QJSN_PRIMITIVE_SLOTS), shared with src/host-calls.ts.
  Napi::Float64Array primitiveSlotsArray() { return primitiveSlots_.Value(); }
  double& primitiveSlot(PrimitiveSlot slot) { return primitiveSlotsData_[static_cast<uint32_t>(slot)]; }
  // The numbers of the job a call of src/ asks for (QJSN_REQUEST_SLOTS), written just before the call.
  Napi::Float64Array requestArray() { return request_.Value(); }
  double request(RequestSlot slot) const { return requestData_[static_cast<uint32_t>(slot)]; }
  // The options of the sandbox being created (QJSN_CREATE_SLOTS), written just before new SandboxHandle.
  Napi::Float64Array createArray() { return createSlots_.Value(); }
  double createOption(CreateSlot slot) const { return createData_[static_cast<uint32_t>(slot)]; }
  // The numbers of a handle call other than a job's (QJSN_CALL_SLOTS), written just before the call.
  Napi::Float64Array callArray() { return callSlots_.Value(); }
  double callSlot(CallSlot slot) const { return callData_[static_cast<uint32_t>(slot)]; }
  // Puts `bytes` where the dispatcher reads them: the exchange buffer when they fit (returns its
  // byte count and leaves `spill` empty), else a Buffer of their own in `spill`.
  uint32_t stage(const std::vector<uint8_t>& bytes, Napi::Value* spill) {
    if (bytes.size() <= kExchangeBytes) {
      std::memcpy(exchangeData_, bytes.data(), bytes.size());
      *spill = env_.Undefined();
      return static_cast<uint32_t>(bytes.size());
    }
    *spill = Napi::Buffer<uint8_t>::Copy(env_, bytes.data(), bytes.size());
    return 0;
  }
  // A host answer as the dispatcher gives it: a byte count in the exchange buffer, a Buffer of its
  // own, or [name, message] for an error.
  HostResult hostResultOf(const Napi::Value& answer) {
    HostResult r;
    if (answer.IsNumber() || answer.IsBuffer() || answer.IsTypedArray()) {
      r.value = resultBytes(answer);
      return r;
    }
    r.ok = false;
    if (answer.IsArray()) {
      Napi::Array a = answer.As<Napi::Array>();
      r.errorName = a.Get(0u).ToString().Utf8Value();
      r.errorMessage = a.Get(1u).ToString().Utf8Value();
    }
    return r;
  }
  // Reads a result the dispatcher or `settle` handed back: a byte count in the exchange buffer or
  // a Buffer/Uint8Array of its own.
  std::vector<uint8_t> resultBytes(const Napi::Value& v) {
    if (v.IsNumber()) {
      size_t n = std::min<size_t>(v.As<Napi::Number>().Uint32Value(), kExchangeBytes);
      return std::vector<uint8_t>(exchangeData_, exchangeData_ + n);
    }
    return bytesOf(v);
  }
  // The answer to a sync host call that can no longer reach its sandbox's JavaScript side.
  static HostResult closedResult() {
    HostResult r;
    r.ok = false;
    r.errorMessage = "the sandbox is shutting down";
    return r;
  }
  void closeAll();
  // Hands every message executor threads (or inline slices) posted to its sandbox. Main thread.
  void drain();
  HostResult runSyncCall(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t>& args);

 private:
  struct Message {
    enum Kind { SyncCall, AsyncCall, Console, EvalDone } kind;
    uint32_t sandboxId = 0;
    uint64_t evalId = 0;
    uint32_t callId = 0;
    uint32_t fnId = 0;
    std::vector<uint8_t> bytes;
    EvalOutcome outcome;
    SyncSlot* slot = nullptr;
  };

  // Queues `m` for the main thread, and wakes the event loop unless it is awake for the outbox
  // already or the message is the outcome the main thread waits for.
  void post(Message m);
  void wakeLoop();
  // Busy-waits up to kReplySpinNs for `ready`, while a core is free beside the running guests (see
  // awaitReply). A miss makes the next waits return at once unless `excused()` says why it missed,
  // until an eval answered through the loop meanwhile proves the miss a passing one (post).
  template <typename Ready, typename Excused>
  void spinForReply(Ready ready, Excused excused);

  Napi::Env env_;
  std::thread::id mainThread_;
  Napi::ThreadSafeFunction tsfn_;
  // The flags below are written under mu_ and read without it by the main thread's waits; their
  // memory orderings are documented once, in native/env_bridge.cc.
  // The loop was woken (or is being woken) for the outbox's messages and has not drained them yet.
  std::atomic<bool> signaled_{false};
  std::atomic<bool> hasMail_{false};              // the outbox is not empty
  bool draining_ = false;                         // drain() is on the stack (main thread only)
  std::pair<uint32_t, uint64_t> expected_{0, 0};  // (sandbox, eval) of expectOutcome; under mu_
  std::atomic<bool> outcomeHere_{false};          // that outcome is in the outbox
  static constexpr int64_t kReplySpinNs = 30 * 1000;
  static constexpr int64_t kSliceStartSpinNs = 150 * 1000;
  int replySpinSkips_ = 0;
  // The eval whose outcome a skipped wait left to the loop, and when; under mu_.
  struct SkippedWait {
    uint32_t sandboxId = 0;
    uint64_t evalId = 0;
    std::chrono::steady_clock::time_point at;
  } skippedWait_;
  std::atomic<bool> waitWouldHaveHit_{false};  // that outcome came within kReplySpinNs: end the skips
  Napi::Reference<Napi::Buffer<uint8_t>> exchange_;
  uint8_t* exchangeData_ = nullptr;
  Napi::Reference<Napi::Float64Array> stats_;
  Napi::Reference<Napi::Float64Array> primitiveSlots_;
  double* primitiveSlotsData_ = nullptr;
  double* statsData_ = nullptr;
  Napi::Reference<Napi::Float64Array> request_;
  double* requestData_ = nullptr;
  Napi::Reference<Napi::Float64Array> createSlots_;
  double* createData_ = nullptr;
  Napi::Reference<Napi::Float64Array> callSlots_;
  double* callData_ = nullptr;
  std::mutex mu_;
  // Vectors, not deques: a drain swaps the outbox with the emptied batch of the drain before
  // (spareBatch_), so that a message costs no allocation of its own on either thread.
  std::vector<Message> outbox_;
  std::vector<Message> spareBatch_;  // main thread only
  static constexpr size_t kSpareBatchMessages = 256;
  bool closed_ = false;
  std::unordered_map<uint32_t, SandboxHandle*> handles_;
  // The sandbox of the last primitive host call: a loop of host calls looks it up once.
  std::pair<uint32_t, SandboxHandle*> lastPrimitiveCaller_{0, nullptr};
  int activeEvals_ = 0;
  uint32_t lastSandboxId_ = 0;
};

}  // namespace qjsn
