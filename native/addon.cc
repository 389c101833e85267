// Module init and the main-thread side of every sandbox: the JS-visible handle, the outbox that
// carries host calls and finished evals from executor threads to the Node event loop, and the
// cleanup hook that frees every live runtime when the environment goes away.
//
// The handle is internal: src/sandbox.ts keeps it in a private field and validates every argument
// before calling in, so the guards here are cheap one-liners that only keep the process alive.
#include <napi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "engine.h"
#include "executor.h"
#include "platform.h"
#include "threads.h"

namespace qjsn {

namespace {

const napi_type_tag kHandleTag = {0x7a1c5e0d2f4b4c11ULL, 0x9e3b6a85d0c2f417ULL};

class SandboxHandle;
std::vector<uint8_t> bytesOf(const Napi::Value& v);

// One per Node environment (main thread or worker).
class EnvBridge : public HostBridge, public std::enable_shared_from_this<EnvBridge> {
 public:
  EnvBridge(Napi::Env env) : env_(env), mainThread_(std::this_thread::get_id()) {}

  void start() {
    Napi::Float64Array stats = Napi::Float64Array::New(env_, kStatsSlots);
    statsData_ = stats.Data();
    stats_ = Napi::Persistent(stats);
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
  bool callSyncPrimitive(uint32_t sandboxId, uint32_t fnId, const Primitive* args, int argc, Primitive* result,
                         char16_t* text, HostResult* fallback) override;
  void postAsyncCall(uint32_t sandboxId, uint64_t evalId, uint32_t callId, uint32_t fnId,
                     std::vector<uint8_t> args) override {
    Message m;
    m.kind = Message::AsyncCall;
    m.sandboxId = sandboxId;
    m.evalId = evalId;
    m.callId = callId;
    m.fnId = fnId;
    m.bytes = std::move(args);
    post(std::move(m));
  }
  void postConsole(uint32_t sandboxId, uint64_t evalId, int level, std::vector<uint8_t> args) override {
    Message m;
    m.kind = Message::Console;
    m.sandboxId = sandboxId;
    m.evalId = evalId;
    m.fnId = static_cast<uint32_t>(level);
    m.bytes = std::move(args);
    post(std::move(m));
  }
  void postEvalDone(uint32_t sandboxId, EvalOutcome outcome) override {
    Message m;
    m.kind = Message::EvalDone;
    m.sandboxId = sandboxId;
    m.outcome = std::move(outcome);
    post(std::move(m));
  }

  // Main thread only.
  void registerHandle(uint32_t id, SandboxHandle* h) { handles_[id] = h; }
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
  // The main-side twin of the executor spin (native/executor.h). The main thread just handed an
  // executor work that is usually answered within microseconds (an eval scheduled, a host result
  // settled). If it returned to the event loop now, the loop would go to sleep and the answer would
  // have to wake it. Instead it busy-waits up to kReplySpinNs for the answer to be posted, while a
  // core is free beside the running guests; the loop then finds the answer ready without sleeping.
  // A wait that missed (a long eval, a slow host function) makes the next kSkipsAfterMiss
  // hand-overs return at once, so a miss costs little CPU overall.
  void awaitReply() {
    if (signaled_.load(std::memory_order_acquire)) return;
    if (replySpinSkips_ > 0) {
      replySpinSkips_--;
      return;
    }
    if (!Executor::instance().mainMaySpin()) return;
    if (!spinUntil(kReplySpinNs, [this] { return signaled_.load(std::memory_order_acquire); }))
      replySpinSkips_ = kSkipsAfterMiss;
  }

  // The buffer shared with src/sandbox.ts for host call arguments and results (main thread only;
  // every use is a synchronous write-then-read).
  static constexpr size_t kExchangeBytes = 64 * 1024;
  Napi::Buffer<uint8_t> exchange() { return exchange_.Value(); }
  // Numbers of the last inline eval (see SandboxHandle::EvalSync), shared with src/sandbox.ts.
  static constexpr size_t kStatsSlots = 8;
  Napi::Float64Array statsArray() { return stats_.Value(); }
  double* stats() { return statsData_; }
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
  // Reads a result the dispatcher or `settle` handed back: a byte count in the exchange buffer or
  // a Buffer/Uint8Array of its own.
  std::vector<uint8_t> resultBytes(const Napi::Value& v) {
    if (v.IsNumber()) {
      size_t n = std::min<size_t>(v.As<Napi::Number>().Uint32Value(), kExchangeBytes);
      return std::vector<uint8_t>(exchangeData_, exchangeData_ + n);
    }
    return bytesOf(v);
  }
  // Freed runtimes leave many small holes in the C heap; give the pages back now and then so a
  // server's RSS follows its live sandboxes.
  void returnMemoryToSystem(int64_t freedBytes) {
    freedSinceTrim_ += freedBytes;
    if (freedSinceTrim_ < kTrimEveryBytes) return;
    freedSinceTrim_ = 0;
    platform::releaseFreeHeap();
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

  void post(Message m) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) {
        if (m.slot) finishSlot(m.slot, closedResult());
        return;
      }
      wake = outbox_.empty();
      outbox_.push_back(std::move(m));
    }
    // The main thread posts only from inline slices, and drains right after each (runInline).
    if (wake && !onMainThread()) {
      auto self = shared_from_this();
      tsfn_.NonBlockingCall([self](Napi::Env, Napi::Function) { self->drain(); });
      signaled_.store(true, std::memory_order_release);
    }
  }
  Napi::Env env_;
  std::thread::id mainThread_;
  Napi::ThreadSafeFunction tsfn_;
  std::atomic<bool> signaled_{false};  // the outbox holds messages and the loop was woken for them
  static constexpr int64_t kReplySpinNs = 30 * 1000;
  static constexpr int kSkipsAfterMiss = 16;
  int replySpinSkips_ = 0;
  Napi::Reference<Napi::Buffer<uint8_t>> exchange_;
  uint8_t* exchangeData_ = nullptr;
  Napi::Reference<Napi::Float64Array> stats_;
  double* statsData_ = nullptr;
  std::mutex mu_;
  std::deque<Message> outbox_;
  bool closed_ = false;
  std::unordered_map<uint32_t, SandboxHandle*> handles_;
  // The sandbox of the last primitive host call: a loop of host calls looks it up once.
  std::pair<uint32_t, SandboxHandle*> lastPrimitiveCaller_{0, nullptr};
  int activeEvals_ = 0;
  uint32_t lastSandboxId_ = 0;
  int64_t freedSinceTrim_ = 0;
  static constexpr int64_t kTrimEveryBytes = 64ll << 20;
};

// [status, body | message, [name, type, ...]] of a snapshot read or write.
Napi::Value snapshotResultToJs(Napi::Env env, const SnapshotResult& r, Napi::Value payload) {
  Napi::Array notRestored = Napi::Array::New(env, r.notRestored.size() * 2);
  for (size_t i = 0; i < r.notRestored.size(); i++) {
    notRestored.Set(static_cast<uint32_t>(2 * i), Napi::String::New(env, r.notRestored[i].name));
    notRestored.Set(static_cast<uint32_t>(2 * i + 1), Napi::String::New(env, r.notRestored[i].type));
  }
  Napi::Array a = Napi::Array::New(env, 3);
  a.Set(0u, Napi::Number::New(env, static_cast<int>(r.status)));
  a.Set(1u, r.status == SnapshotStatus::Ok ? payload : Napi::String::New(env, r.message).As<Napi::Value>());
  a.Set(2u, notRestored);
  return a;
}

Napi::Value outcomeToJs(Napi::Env env, EvalOutcome& o) {
  Napi::Array a = Napi::Array::New(env, o.snapshotOp ? 11 : 10);
  a.Set(0u, Napi::Number::New(env, static_cast<int>(o.status)));
  a.Set(1u, o.value.empty() ? env.Undefined()
                            : Napi::Buffer<uint8_t>::Copy(env, o.value.data(), o.value.size()).As<Napi::Value>());
  a.Set(2u, Napi::String::New(env, o.message));
  a.Set(3u, Napi::Number::New(env, static_cast<int>(o.stop)));
  a.Set(4u, o.console.empty() ? env.Undefined()
                              : Napi::Buffer<uint8_t>::Copy(env, o.console.data(), o.console.size()).As<Napi::Value>());
  a.Set(5u, Napi::Boolean::New(env, o.consoleTruncated));
  a.Set(6u, Napi::Number::New(env, o.executionMs));
  a.Set(7u, Napi::Number::New(env, o.hostCalls));
  a.Set(8u, Napi::Number::New(env, static_cast<double>(o.memoryUsedBytes)));
  a.Set(9u, Napi::Number::New(env, static_cast<double>(o.peakMemoryBytes)));
  if (o.snapshotOp) a.Set(10u, snapshotResultToJs(env, o.snapshot, env.Undefined()));
  return a;
}

std::vector<uint8_t> bytesOf(const Napi::Value& v) {
  if (v.IsBuffer()) {
    auto b = v.As<Napi::Buffer<uint8_t>>();
    return std::vector<uint8_t>(b.Data(), b.Data() + b.Length());
  }
  if (v.IsTypedArray()) {
    auto t = v.As<Napi::Uint8Array>();
    return std::vector<uint8_t>(t.Data(), t.Data() + t.ByteLength());
  }
  return {};
}

class SandboxHandle : public Napi::ObjectWrap<SandboxHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "SandboxHandle",
                       {
                           InstanceMethod("evalSync", &SandboxHandle::EvalSync),
                           InstanceMethod("evalAsync", &SandboxHandle::EvalAsync),
                           InstanceMethod("stop", &SandboxHandle::Stop),
                           InstanceMethod("settle", &SandboxHandle::Settle),
                           InstanceMethod("answerSync", &SandboxHandle::AnswerSync),
                           InstanceMethod("defineFunction", &SandboxHandle::DefineFunction),
                           InstanceMethod("defineFrozenFunction", &SandboxHandle::DefineFrozenFunction),
                           InstanceMethod("setGlobal", &SandboxHandle::SetGlobal),
                           InstanceMethod("getGlobal", &SandboxHandle::GetGlobal),
                           InstanceMethod("globalNames", &SandboxHandle::GlobalNames),
                           InstanceMethod("memoryUsage", &SandboxHandle::MemoryUsage),
                           InstanceMethod("writeSnapshot", &SandboxHandle::WriteSnapshot),
                           InstanceMethod("readSnapshot", &SandboxHandle::ReadSnapshot),
                           InstanceMethod("restoreAsync", &SandboxHandle::RestoreAsync),
                           InstanceMethod("writeSnapshotAsync", &SandboxHandle::WriteSnapshotAsync),
                           InstanceMethod("dispose", &SandboxHandle::Dispose),
                           InstanceMethod("setClock", &SandboxHandle::SetClock),
                           InstanceMethod("setRandomSeed", &SandboxHandle::SetRandomSeed),
                       });
  }

  // new SandboxHandle(memoryLimit, maxStack, captureConsole, maxConsoleBytes, dispatcher, primitiveDispatcher, copyLimit)
  SandboxHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SandboxHandle>(info) {
    Napi::Env env = info.Env();
    bridge_ = env.GetInstanceData<std::shared_ptr<EnvBridge>>()->get()->shared_from_this();
    if (info.Length() < 6 || !info[4].IsFunction() || !info[5].IsFunction()) {
      Napi::TypeError::New(env, "SandboxHandle: bad arguments").ThrowAsJavaScriptException();
      return;
    }
    EngineOptions o;
    o.memoryLimitBytes = static_cast<size_t>(info[0].ToNumber().Int64Value());
    o.maxStackSizeBytes = static_cast<size_t>(info[1].ToNumber().Int64Value());
    o.captureConsole = info[2].ToBoolean().Value();
    o.maxConsoleBytes = static_cast<size_t>(info[3].ToNumber().Int64Value());
    o.copyLimitBytes = info.Length() > 6 ? static_cast<uint64_t>(info[6].ToNumber().Int64Value()) : o.memoryLimitBytes;
    // Weak: the dispatcher closes over the Sandbox that owns this handle, and a strong reference
    // would keep both alive forever. An eval in flight keeps them alive through its promise.
    dispatcher_ = Napi::Weak(info[4].As<Napi::Function>());
    primitiveDispatcher_ = Napi::Weak(info[5].As<Napi::Function>());
    id_ = bridge_->nextSandboxId();
    engine_ = std::make_shared<Engine>(id_, o, bridge_);
    if (!engine_->valid()) {
      engine_.reset();
      Napi::Error::New(env, "OUT_OF_MEMORY: could not create the sandbox runtime").ThrowAsJavaScriptException();
      return;
    }
    napi_type_tag_object(env, info.This(), &kHandleTag);
    bridge_->registerHandle(id_, this);
    // V8 sees only a small wrapper object; tell it what the runtime behind it costs so forgotten
    // (never disposed) sandboxes get collected before thousands pile up.
    externalBytes_ = static_cast<int64_t>(engine_->memoryUsed()) + kHandleOverheadBytes;
    Napi::MemoryManagement::AdjustExternalMemory(env, externalBytes_);
  }

  ~SandboxHandle() override { release(); }

  void release() {
    if (!engine_) return;
    if (engine_->dispose()) Executor::instance().schedule(engine_);
    engine_.reset();
    // After dispose(): the guest waiting for this answer sees its eval stopped when it wakes.
    if (parkedSlot_) EnvBridge::finishSlot(std::exchange(parkedSlot_, nullptr), EnvBridge::closedResult());
    Napi::MemoryManagement::AdjustExternalMemory(Env(), -externalBytes_);
    bridge_->returnMemoryToSystem(externalBytes_);
    if (deferred_) {
      bridge_->evalEnded();
      deferred_.reset();
    }
    bridge_->unregisterHandle(id_);
  }

  void completeEval(EvalOutcome& o) {
    if (!deferred_ || o.evalId != evalId_) return;
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    auto deferred = std::move(*deferred_);
    deferred_.reset();
    bridge_->evalEnded();
    deferred.Resolve(outcomeToJs(env, o));
  }

  void hostCall(uint32_t fnId, uint32_t callId, uint64_t evalId, std::vector<uint8_t>& args) {
    if (!deferred_ || evalId != evalId_) return;  // the eval ended; the call is dropped
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (dispatcher_.Value().IsEmpty()) return;
    Napi::Value spill;
    uint32_t argLength = bridge_->stage(args, &spill);
    dispatcher_.Call({Napi::Number::New(env, 1), Napi::Number::New(env, fnId), Napi::Number::New(env, callId),
                      Napi::Number::New(env, argLength), spill, Napi::Number::New(env, static_cast<double>(evalId))});
    if (env.IsExceptionPending()) env.GetAndClearPendingException();
  }

  // A console line of the running eval, for live progress: dispatcher(2, level, 0, ...).
  void consoleLine(uint32_t level, uint64_t evalId, std::vector<uint8_t>& args) {
    if (!deferred_ || evalId != evalId_) return;
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (dispatcher_.Value().IsEmpty()) return;
    Napi::Value spill;
    uint32_t argLength = bridge_->stage(args, &spill);
    dispatcher_.Call({Napi::Number::New(env, 2), Napi::Number::New(env, level), Napi::Number::New(env, 0),
                      Napi::Number::New(env, argLength), spill, Napi::Number::New(env, static_cast<double>(evalId))});
    if (env.IsExceptionPending()) env.GetAndClearPendingException();
  }

  // A sync host call: dispatcher(0, fnId, token, ...). With a slot (the guest waits on an executor
  // thread) the token is not 0, and the dispatcher may answer undefined, then later through
  // answerSync(token, result) (src/sandbox.ts decodes large arguments a slice at a time): the slot
  // is parked here until then, or until the handle is released. Nothing, when parked.
  std::optional<HostResult> syncCall(uint32_t fnId, std::vector<uint8_t>& args, EnvBridge::SyncSlot* slot) {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    if (dispatcher_.Value().IsEmpty()) return EnvBridge::closedResult();
    uint32_t token = slot ? ++lastSyncToken_ : 0;
    Napi::Value spill;
    uint32_t argLength = bridge_->stage(args, &spill);
    Napi::Value ret = dispatcher_.Call({Napi::Number::New(env, 0), Napi::Number::New(env, fnId),
                                        Napi::Number::New(env, token), Napi::Number::New(env, argLength), spill,
                                        Napi::Number::New(env, 0)});
    if (env.IsExceptionPending()) {
      Napi::Error e = env.GetAndClearPendingException();
      HostResult r;
      r.ok = false;
      r.errorMessage = "host function failed";
      return r;
    }
    if (slot && ret.IsUndefined() && engine_) {
      parkedSlot_ = slot;
      parkedToken_ = token;
      return std::nullopt;
    }
    return hostResultOf(ret);
  }

  // The fast path of a sync host call on the main thread: primitiveDispatcher(fnId * 4 + argc, ...args)
  // gets the primitives as they are and answers with a primitive, [bytes] (the codec's answer, as
  // dispatcher's) or [name, message].
  bool syncCallPrimitive(uint32_t fnId, const Primitive* args, int argc, Primitive* result, char16_t* text,
                         HostResult* fallback) {
    napi_env env = Env();
    // One handle scope for a run of calls rather than one each (opening one allocates): the
    // handles of at most kCallsPerPrimitiveScope calls stay alive. EvalSync closes it when the
    // eval ends; until then nothing opened after it outlives a call, so scopes still nest.
    // The dispatcher and `undefined` are looked up once per scope.
    PrimitiveScope& p = primitiveScope_;
    if (p.scope == nullptr || ++p.calls == kCallsPerPrimitiveScope) {
      closePrimitiveScope();
      napi_open_handle_scope(env, &p.scope);
      napi_get_reference_value(env, primitiveDispatcher_, &p.dispatcher);
      napi_get_undefined(env, &p.undefined);
    }
    if (p.dispatcher == nullptr) {
      *fallback = EnvBridge::closedResult();
      return false;
    }
    return callPrimitiveDispatcher(env, fnId, args, argc, result, text, fallback);
  }

 private:
  void closePrimitiveScope() {
    if (primitiveScope_.scope != nullptr) napi_close_handle_scope(Env(), primitiveScope_.scope);
    primitiveScope_ = PrimitiveScope();
  }

  // syncCallPrimitive inside its handle scope. Raw Node-API calls that create no handle, scope or
  // heap block beyond the arguments and the answer: this path is all overhead.
  bool callPrimitiveDispatcher(napi_env env, uint32_t fnId, const Primitive* args, int argc, Primitive* result,
                               char16_t* text, HostResult* fallback) {
    static_assert(kMaxPrimitiveArgs < 4, "argc shares a number with fnId");
    napi_value argv[1 + kMaxPrimitiveArgs];
    napi_create_double(env, static_cast<double>(fnId) * 4 + argc, &argv[0]);  // `call` (src/native.ts)
    for (int i = 0; i < argc; i++) {
      napi_value& v = argv[1 + i];
      const Primitive& a = args[i];
      switch (a.kind) {
        case Primitive::Kind::Undefined: v = primitiveScope_.undefined; break;
        case Primitive::Kind::Null: napi_get_null(env, &v); break;
        case Primitive::Kind::Boolean: napi_get_boolean(env, a.number != 0, &v); break;
        case Primitive::Kind::Number: napi_create_double(env, a.number, &v); break;
        case Primitive::Kind::Utf8: napi_create_string_utf8(env, static_cast<const char*>(a.chars), a.length, &v); break;
        case Primitive::Kind::Utf16:
          napi_create_string_utf16(env, static_cast<const char16_t*>(a.chars), a.length, &v);
          break;
      }
    }
    napi_value ret;
    if (napi_call_function(env, primitiveScope_.undefined, primitiveScope_.dispatcher, 1 + argc, argv, &ret) !=
        napi_ok) {
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) Env().GetAndClearPendingException();
      fallback->ok = false;
      fallback->errorMessage = "host function failed";
      return false;
    }
    if (napi_get_value_double(env, ret, &result->number) == napi_ok) {  // the usual answer: one call
      result->kind = Primitive::Kind::Number;
      return true;
    }
    napi_valuetype type;
    napi_typeof(env, ret, &type);
    switch (type) {
      case napi_undefined: result->kind = Primitive::Kind::Undefined; return true;
      case napi_null: result->kind = Primitive::Kind::Null; return true;
      case napi_boolean: {
        bool b = false;
        napi_get_value_bool(env, ret, &b);
        result->kind = Primitive::Kind::Boolean;
        result->number = b;
        return true;
      }
      case napi_string: {
        // The dispatcher answers strings of at most kMaxPrimitiveChars units (src/host-calls.ts).
        size_t length = 0;
        napi_get_value_string_utf16(env, ret, nullptr, 0, &length);
        if (length > kMaxPrimitiveChars) break;
        napi_get_value_string_utf16(env, ret, text, length + 1, &length);  // and the terminator
        result->kind = Primitive::Kind::Utf16;
        result->chars = text;
        result->length = length;
        return true;
      }
      default: break;
    }
    Napi::Array a = Napi::Value(Env(), ret).As<Napi::Array>();
    if (a.IsArray() && a.Length() == 1) {
      fallback->value = bridge_->resultBytes(a.Get(0u));
      return false;
    }
    fallback->ok = false;
    if (a.IsArray() && a.Length() == 2) {
      fallback->errorName = a.Get(0u).ToString().Utf8Value();
      fallback->errorMessage = a.Get(1u).ToString().Utf8Value();
    }
    return false;
  }

  bool alive(const Napi::CallbackInfo& info) {
    bool tagged = false;
    napi_check_object_type_tag(info.Env(), info.This(), &kHandleTag, &tagged);
    if (!tagged || !engine_) {
      Napi::Error::New(info.Env(), "DISPOSED: the sandbox is disposed").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  static EvalRequest requestOf(const Napi::CallbackInfo& info) {
    EvalRequest r;
    r.code = info[0].ToString().Utf8Value();
    r.filename = info[1].ToString().Utf8Value();
    r.executionBudgetMs = info[2].ToNumber().DoubleValue();
    r.describeUnserializable = info[3].ToBoolean().Value();
    r.streamConsole = info.Length() > 5 && info[5].ToBoolean().Value();
    return r;
  }

  // evalSync(code, filename, budgetMs, describe) -> outcome array
  // The inline path answers without building an array: the numbers go into the environment's
  // shared stats array and a value that fits into the exchange buffer; only console output, a
  // message or an oversized value come back as JS values, as [value | undefined, message, console].
  Napi::Value EvalSync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 4) return env.Undefined();
    std::shared_ptr<Engine> keep = engine_;
    // A host function may call evalSync here again (refused as busy): it must leave the outer
    // eval's scope open. Each call closes only the scope its own eval opened.
    PrimitiveScope outer = std::exchange(primitiveScope_, PrimitiveScope());
    EvalOutcome o = keep->evalSync(requestOf(info));
    closePrimitiveScope();
    primitiveScope_ = outer;
    double* stats = bridge_->stats();
    stats[0] = static_cast<int>(o.status);
    stats[1] = static_cast<int>(o.stop);
    stats[2] = o.consoleTruncated ? 1 : 0;
    stats[3] = o.executionMs;
    stats[4] = o.hostCalls;
    stats[5] = static_cast<double>(o.memoryUsedBytes);
    stats[6] = static_cast<double>(o.peakMemoryBytes);
    Napi::Value spill = env.Undefined();
    stats[7] = o.value.empty() ? -1 : bridge_->stage(o.value, &spill);
    if (!spill.IsUndefined()) stats[7] = -1;
    if (spill.IsUndefined() && o.message.empty() && o.console.empty()) return env.Undefined();
    Napi::Array extras = Napi::Array::New(env, 3);
    extras.Set(0u, spill);
    extras.Set(1u, Napi::String::New(env, o.message));
    extras.Set(2u, o.console.empty()
                       ? env.Undefined()
                       : Napi::Buffer<uint8_t>::Copy(env, o.console.data(), o.console.size()).As<Napi::Value>());
    return extras;
  }

  // evalAsync(code, filename, budgetMs, describe, evalId, streamConsole, inline) -> Promise<outcome array>; null when busy
  Napi::Value EvalAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 5) return env.Undefined();
    if (engine_->broken()) return env.Null();
    bool runInline = info.Length() > 6 && info[6].ToBoolean().Value();
    return startAsync(env, requestOf(info), static_cast<uint64_t>(info[4].ToNumber().Int64Value()), runInline);
  }

  // restoreAsync(body, budgetMs, evalId) -> Promise<outcome array with [status, message, [name, type, ...]]
  // at index 10>; null when busy. Runs on an executor thread like an eval: re-created functions
  // and classes run guest code, which never runs on the Node main thread this way.
  Napi::Value RestoreAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 3) return env.Undefined();
    if (engine_->broken()) return env.Null();
    EvalRequest r;
    r.restore = true;
    r.snapshotBody = bytesOf(info[0]);
    r.executionBudgetMs = info[1].ToNumber().DoubleValue();
    return startAsync(env, std::move(r), static_cast<uint64_t>(info[2].ToNumber().Int64Value()));
  }

  // writeSnapshotAsync(excludedNames, maxBytes, evalId) -> Promise<outcome array: the body as the
  // value, [status, message, [name, type, ...]] at index 10>; null when busy.
  Napi::Value WriteSnapshotAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 3 || !info[0].IsArray()) return env.Undefined();
    if (engine_->broken()) return env.Null();
    EvalRequest r;
    r.takeSnapshot = true;
    Napi::Array names = info[0].As<Napi::Array>();
    for (uint32_t i = 0; i < names.Length(); i++) r.snapshotExclude.insert(names.Get(i).ToString().Utf16Value());
    r.snapshotMaxBytes = static_cast<uint64_t>(info[1].ToNumber().Int64Value());
    return startAsync(env, std::move(r), static_cast<uint64_t>(info[2].ToNumber().Int64Value()));
  }

  Napi::Value startAsync(Napi::Env env, EvalRequest request, uint64_t evalId, bool runInline = false) {
    if (deferred_ || !engine_->beginAsync(std::move(request), evalId)) return env.Null();
    evalId_ = evalId;
    inline_ = runInline;
    deferred_.emplace(Napi::Promise::Deferred::New(env));
    Napi::Promise promise = deferred_->Promise();
    bridge_->evalStarted();
    run();
    return promise;
  }

  // Runs the engine's next slice: on an executor thread, or here for an inline eval.
  void run() {
    if (inline_) {
      runInline();
      return;
    }
    Executor::instance().schedule(engine_);
    bridge_->awaitReply();
  }

  // An inline eval's slices run on the main thread, each followed by the dispatch of what it
  // posted (host calls, console lines, its outcome): a host function that answers at once resumes
  // the guest within the same loop, with no thread hand-over. The event loop waits meanwhile.
  void runInline() {
    if (inlineRunning_) {
      inlineAgain_ = true;  // a host result arrived while a slice was being dispatched
      return;
    }
    inlineRunning_ = true;
    std::shared_ptr<EnvBridge> bridge = bridge_;  // a host function may dispose this handle
    std::shared_ptr<Engine> engine = engine_;
    do {
      inlineAgain_ = engine->runSlice();
      bridge->drain();
    } while (inlineAgain_);
    inlineRunning_ = false;
  }

  // stop(reason, evalId)
  Napi::Value Stop(const Napi::CallbackInfo& info) {
    if (!alive(info) || info.Length() < 2) return info.Env().Undefined();
    auto reason = static_cast<StopReason>(info[0].ToNumber().Int32Value());
    if (reason != StopReason::WallBudget && reason != StopReason::Abort) return info.Env().Undefined();
    if (engine_->requestStop(reason, static_cast<uint64_t>(info[1].ToNumber().Int64Value()))) run();
    return info.Env().Undefined();
  }

  // answerSync(token, bytes in the exchange buffer | Buffer | [name, message]): see syncCall.
  Napi::Value AnswerSync(const Napi::CallbackInfo& info) {
    if (!alive(info) || info.Length() < 2) return info.Env().Undefined();
    if (parkedSlot_ && info[0].ToNumber().Uint32Value() == parkedToken_)
      EnvBridge::finishSlot(std::exchange(parkedSlot_, nullptr), hostResultOf(info[1]));
    return info.Env().Undefined();
  }

  // A host answer as the dispatcher gives it: a byte count in the exchange buffer, a Buffer of its
  // own, or [name, message] for an error.
  HostResult hostResultOf(const Napi::Value& answer) {
    HostResult r;
    if (answer.IsNumber() || answer.IsBuffer() || answer.IsTypedArray()) {
      r.value = bridge_->resultBytes(answer);
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

  // settle(callId, ok, bytes | [name, message])
  Napi::Value Settle(const Napi::CallbackInfo& info) {
    if (!alive(info) || info.Length() < 3) return info.Env().Undefined();
    HostResult r;
    r.callId = info[0].ToNumber().Uint32Value();
    r.ok = info[1].ToBoolean().Value();
    if (r.ok) {
      r.value = bridge_->resultBytes(info[2]);
    } else if (info[2].IsArray()) {
      Napi::Array a = info[2].As<Napi::Array>();
      r.errorName = a.Get(0u).ToString().Utf8Value();
      r.errorMessage = a.Get(1u).ToString().Utf8Value();
    }
    if (engine_->deliver(std::move(r))) run();
    else if (!inline_) bridge_->awaitReply();  // the guest's executor is still in its slice, waiting
    return info.Env().Undefined();
  }

  // defineFunction(path, fnId, async) -> error text ("" on success)
  Napi::Value DefineFunction(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 3) return env.Undefined();
    if (engine_->busy()) return Napi::String::New(env, "BUSY");
    return Napi::String::New(env, engine_->defineFunction(info[0].ToString().Utf8Value(),
                                                          info[1].ToNumber().Uint32Value(), info[2].ToBoolean().Value()));
  }

  // defineFrozenFunction(name, fnId) -> true (installed), false (the guest keeps its own) or error text
  Napi::Value DefineFrozenFunction(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 2) return env.Undefined();
    if (engine_->busy()) return Napi::String::New(env, "BUSY");
    bool installed = false;
    std::string error = engine_->defineFrozenFunction(info[0].ToString().Utf8Value(), info[1].ToNumber().Uint32Value(),
                                                      &installed);
    if (!error.empty()) return Napi::String::New(env, error);
    return Napi::Boolean::New(env, installed);
  }

  // setGlobal(name, bytes) -> error text
  Napi::Value SetGlobal(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 2) return env.Undefined();
    if (engine_->busy()) return Napi::String::New(env, "BUSY");
    std::vector<uint8_t> bytes = bytesOf(info[1]);
    return Napi::String::New(env, engine_->setGlobal(info[0].ToString().Utf8Value(), bytes.data(), bytes.size()));
  }

  // getGlobal(name) -> [status, bytes | message]
  Napi::Value GetGlobal(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 1) return env.Undefined();
    Napi::Array a = Napi::Array::New(env, 2);
    if (engine_->busy()) {
      a.Set(0u, Napi::Number::New(env, static_cast<int>(EvalStatus::Busy)));
      return a;
    }
    std::vector<uint8_t> out;
    EvalStatus status;
    std::string err = engine_->getGlobal(info[0].ToString().Utf8Value(), &out, &status);
    a.Set(0u, Napi::Number::New(env, static_cast<int>(status)));
    if (err.empty()) a.Set(1u, Napi::Buffer<uint8_t>::Copy(env, out.data(), out.size()));
    else a.Set(1u, Napi::String::New(env, err));
    return a;
  }

  // globalNames(limit) -> string[] | "BUSY"
  Napi::Value GlobalNames(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 1 || !info[0].IsNumber()) return env.Undefined();
    if (engine_->busy()) return Napi::String::New(env, "BUSY");
    std::vector<std::string> names = engine_->globalNames(info[0].As<Napi::Number>().Uint32Value());
    Napi::Array a = Napi::Array::New(env, names.size());
    for (size_t i = 0; i < names.size(); i++) a.Set(static_cast<uint32_t>(i), Napi::String::New(env, names[i]));
    return a;
  }

  // writeSnapshot(excludedNames, maxBytes) -> [status, body | message, [name, type, ...]]; "BUSY"
  Napi::Value WriteSnapshot(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 2 || !info[0].IsArray()) return env.Undefined();
    if (engine_->busy()) return Napi::String::New(env, "BUSY");
    std::unordered_set<std::u16string> exclude;
    Napi::Array names = info[0].As<Napi::Array>();
    for (uint32_t i = 0; i < names.Length(); i++) exclude.insert(names.Get(i).ToString().Utf16Value());
    std::vector<uint8_t> body;
    SnapshotResult r = engine_->writeSnapshot(exclude, static_cast<uint64_t>(info[1].ToNumber().Int64Value()), &body);
    Napi::Value payload = env.Undefined();
    if (r.status == SnapshotStatus::Ok) payload = Napi::Buffer<uint8_t>::Copy(env, body.data(), body.size());
    return snapshotResultToJs(env, r, payload);
  }

  // readSnapshot(body, budgetMs) -> [status, undefined | message, [name, type, ...]]; "BUSY"
  Napi::Value ReadSnapshot(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 2) return env.Undefined();
    if (engine_->busy()) return Napi::String::New(env, "BUSY");
    std::vector<uint8_t> body = bytesOf(info[0]);
    SnapshotResult r = engine_->readSnapshot(body.data(), body.size(), info[1].ToNumber().DoubleValue());
    return snapshotResultToJs(env, r, env.Undefined());
  }

  Napi::Value MemoryUsage(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info)) return env.Undefined();
    Napi::Array a = Napi::Array::New(env, 3);
    a.Set(0u, Napi::Number::New(env, static_cast<double>(engine_->memoryUsed())));
    a.Set(1u, Napi::Number::New(env, static_cast<double>(engine_->memoryPeak())));
    a.Set(2u, Napi::Number::New(env, static_cast<double>(engine_->memoryLimit())));
    return a;
  }

  // setClock(fixed, epochMs, localTimeUtc) -> false when busy or refused (native/clock.cc)
  Napi::Value SetClock(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 3) return env.Undefined();
    return Napi::Boolean::New(env, engine_->setClock(info[0].ToBoolean().Value(), info[1].ToNumber().DoubleValue(),
                                                     info[2].ToBoolean().Value()));
  }

  // setRandomSeed(seed: integer below 2**53) -> false when busy
  Napi::Value SetRandomSeed(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!alive(info) || info.Length() < 1) return env.Undefined();
    double seed = info[0].ToNumber().DoubleValue();
    if (!(seed >= 0 && seed < 9007199254740992.0)) return Napi::Boolean::New(env, false);
    return Napi::Boolean::New(env, engine_->setRandomSeed(static_cast<uint64_t>(seed)));
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    if (engine_) {
      if (deferred_) {
        // Answer the pending eval now; the executor frees the runtime when the guest stops.
        EvalOutcome o;
        o.status = EvalStatus::Disposed;
        o.evalId = evalId_;
        completeEval(o);
      }
      release();
    }
    return info.Env().Undefined();
  }

  std::shared_ptr<EnvBridge> bridge_;
  std::shared_ptr<Engine> engine_;
  Napi::FunctionReference dispatcher_;
  Napi::FunctionReference primitiveDispatcher_;
  uint32_t id_ = 0;
  uint64_t evalId_ = 0;
  std::optional<Napi::Promise::Deferred> deferred_;
  bool inline_ = false;         // the current eval runs on the main thread
  bool inlineRunning_ = false;  // runInline is on the stack
  bool inlineAgain_ = false;
  // The handle scope of syncCallPrimitive, open during an inline eval, and what it holds.
  struct PrimitiveScope {
    napi_handle_scope scope = nullptr;
    napi_value dispatcher = nullptr;  // null if collected
    napi_value undefined = nullptr;
    uint32_t calls = 0;
  } primitiveScope_;
  static constexpr uint32_t kCallsPerPrimitiveScope = 64;
  EnvBridge::SyncSlot* parkedSlot_ = nullptr;  // a sync host call answered later (syncCall)
  uint32_t parkedToken_ = 0;
  uint32_t lastSyncToken_ = 0;
  int64_t externalBytes_ = 0;
  static constexpr int64_t kHandleOverheadBytes = 16 * 1024;
};

HostResult EnvBridge::runSyncCall(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t>& args) {
  auto it = handles_.find(sandboxId);
  if (it == handles_.end()) return closedResult();
  return *it->second->syncCall(fnId, args, nullptr);
}

bool EnvBridge::callSyncPrimitive(uint32_t sandboxId, uint32_t fnId, const Primitive* args, int argc, Primitive* result,
                                  char16_t* text, HostResult* fallback) {
  if (lastPrimitiveCaller_.first != sandboxId) {
    auto it = handles_.find(sandboxId);
    if (it == handles_.end()) {
      *fallback = closedResult();
      return false;
    }
    lastPrimitiveCaller_ = *it;
  }
  return lastPrimitiveCaller_.second->syncCallPrimitive(fnId, args, argc, result, text, fallback);
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
  std::deque<Message> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(outbox_);
    signaled_.store(false, std::memory_order_relaxed);
  }
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
}

void EnvBridge::closeAll() {
  std::deque<Message> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    batch.swap(outbox_);
  }
  for (Message& m : batch)
    if (m.slot) finishSlot(m.slot, closedResult());
  auto handles = handles_;
  for (auto& [id, h] : handles) h->release();
  tsfn_.Release();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto bridge = std::make_shared<EnvBridge>(env);
  bridge->start();
  env.SetInstanceData(new std::shared_ptr<EnvBridge>(bridge));
  env.AddCleanupHook([bridge]() { bridge->closeAll(); });
  exports.Set("SandboxHandle", SandboxHandle::Define(env));
  exports.Set("exchange", bridge->exchange());
  exports.Set("syncStats", bridge->statsArray());
  exports.Set("threadStackBytes", Napi::Number::New(env, static_cast<double>(Executor::kThreadStackBytes)));
  exports.Set("executorThreads", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                Executor::Counts c = Executor::instance().counts();
                Napi::Array a = Napi::Array::New(info.Env(), 2);
                a.Set(0u, Napi::Number::New(info.Env(), c.threads));
                a.Set(1u, Napi::Number::New(info.Env(), c.maxThreads));
                return a;
              }));
  exports.Set("engineVersion", Napi::String::New(env, JS_GetVersion()));
  return exports;
}

}  // namespace

}  // namespace qjsn

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return qjsn::Init(env, exports); }

NODE_API_MODULE(quickjs_native, InitAddon)
