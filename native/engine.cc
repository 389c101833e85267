#include "engine.h"

#include <time.h>

#include <cstdlib>
#include <cstring>

#include "guest_codec.h"
#include "platform.h"
#include "realm.h"

namespace qjsn {

int64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

// Allocation hooks: the engine enforces the limit itself; these keep a cheap usage and peak
// count per sandbox for stats and for telling out-of-memory from a guest `throw null`.
size_t usableSize(const void* p) { return platform::mallocUsableSize(const_cast<void*>(p)); }

void account(void* opaque, ptrdiff_t delta) {
  auto* m = static_cast<MemoryCounter*>(opaque);
  size_t now = m->used.fetch_add(static_cast<size_t>(delta), std::memory_order_relaxed) + static_cast<size_t>(delta);
  if (delta > 0 && now > m->peak.load(std::memory_order_relaxed)) m->peak.store(now, std::memory_order_relaxed);
}

void* hookCalloc(void* opaque, size_t count, size_t size) {
  void* p = calloc(count, size);
  if (p) account(opaque, static_cast<ptrdiff_t>(usableSize(p)));
  return p;
}

void* hookMalloc(void* opaque, size_t size) {
  void* p = malloc(size);
  if (p) account(opaque, static_cast<ptrdiff_t>(usableSize(p)));
  return p;
}

void hookFree(void* opaque, void* ptr) {
  if (!ptr) return;
  account(opaque, -static_cast<ptrdiff_t>(usableSize(ptr)));
  free(ptr);
}

void* hookRealloc(void* opaque, void* ptr, size_t size) {
  size_t old = usableSize(ptr);
  if (size == 0) {
    hookFree(opaque, ptr);
    return nullptr;
  }
  void* p = realloc(ptr, size);
  if (!p) return nullptr;
  account(opaque, static_cast<ptrdiff_t>(usableSize(p)) - static_cast<ptrdiff_t>(old));
  return p;
}

const JSMallocFunctions kMallocHooks = {hookCalloc, hookMalloc, hookFree, hookRealloc, usableSize};

int interruptHandler(JSRuntime*, void* opaque) { return static_cast<Engine*>(opaque)->onInterrupt(); }

Engine* engineOf(JSContext* ctx) { return static_cast<Engine*>(JS_GetContextOpaque(ctx)); }

JSValue hostTrampoline(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int magic, JSValueConst* data) {
  bool async = JS_VALUE_GET_BOOL(data[0]);
  return engineOf(ctx)->callHost(magic, async, argc, argv);
}

JSValue consoleTrampoline(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int level) {
  return engineOf(ctx)->writeConsole(level, argc, argv);
}

constexpr const char* kConsoleLevels[] = {"log", "info", "warn", "error", "debug"};

std::string errorText(JSContext* ctx, JSValueConst v, const char* prop) {
  if (!JS_IsObject(v)) return std::string();
  OwnedAtom atom(ctx, JS_NewAtom(ctx, prop));
  OwnedValue cur = OwnedValue::dup(ctx, v);
  for (int hops = 0; hops < 8 && JS_IsObject(cur.get()) && !JS_IsProxy(cur.get()); hops++) {
    OwnedDescriptor d(ctx);
    int r = d.load(cur.get(), atom.get());
    if (r < 0) {
      JS_FreeValue(ctx, JS_GetException(ctx));
      return std::string();
    }
    if (r == 1) {
      if (d.isAccessor() || !JS_IsString(d.desc.value)) return std::string();
      size_t len;
      const char* s = JS_ToCStringLen(ctx, &len, d.desc.value);
      if (!s) return std::string();
      std::string out(s, len);
      JS_FreeCString(ctx, s);
      return out;
    }
    cur = OwnedValue(ctx, JS_GetPrototype(ctx, cur.get()));
  }
  return std::string();
}

}  // namespace

Engine::Engine(uint32_t id, const EngineOptions& options, std::shared_ptr<HostBridge> bridge)
    : id_(id), options_(options), bridge_(std::move(bridge)) {
  rt_ = JS_NewRuntime2(&kMallocHooks, &memory_);
  if (!rt_) return;
  JS_SetRuntimeOpaque(rt_, this);
  JS_SetMemoryLimit(rt_, options_.memoryLimitBytes);
  JS_SetMaxStackSize(rt_, options_.maxStackSizeBytes);
  JS_SetInterruptHandler(rt_, interruptHandler, this);
  JSContext* ctx = JS_NewContextRaw(rt_);
  // No `performance` (a real high-resolution clock) and no module loader: see SECURITY.md.
  if (!ctx || JS_AddIntrinsicBaseObjects(ctx) || JS_AddIntrinsicDate(ctx) || JS_AddIntrinsicEval(ctx) ||
      JS_AddIntrinsicRegExp(ctx) || JS_AddIntrinsicJSON(ctx) || JS_AddIntrinsicProxy(ctx) ||
      JS_AddIntrinsicMapSet(ctx) || JS_AddIntrinsicTypedArrays(ctx) || JS_AddIntrinsicPromise(ctx) ||
      JS_AddIntrinsicBigInt(ctx) || JS_AddIntrinsicWeakRef(ctx)) {
    if (ctx) JS_FreeContext(ctx);
    JS_FreeRuntime(rt_);
    rt_ = nullptr;
    return;
  }
  ctx_ = ctx;
  JS_SetContextOpaque(ctx_, this);
  if (!intrinsics_.load(ctx_) || !trimRealm(ctx_)) {
    teardown();
    return;
  }
  installGlobals();
}

Engine::~Engine() { teardown(); }

void Engine::installGlobals() {
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedValue console(ctx_, JS_NewObject(ctx_));
  for (int level = 0; level < 5; level++) {
    JSValue fn = JS_NewCFunctionMagic(ctx_, consoleTrampoline, kConsoleLevels[level], 0, JS_CFUNC_generic_magic, level);
    JS_DefinePropertyValueStr(ctx_, console.get(), kConsoleLevels[level], fn, JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  }
  JS_DefinePropertyValueStr(ctx_, global.get(), "console", console.release(), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
}

void Engine::teardown() {
  if (!rt_) return;
  if (ctx_) {
    JS_UpdateStackTop(rt_);
    clearEvalState();
    JS_DropPendingJobs(rt_);
    intrinsics_.clear();
    JS_FreeContext(ctx_);
    ctx_ = nullptr;
  }
  JS_FreeRuntime(rt_);
  rt_ = nullptr;
}

bool Engine::dispose() {
  std::lock_guard<std::mutex> lock(mu_);
  disposeRequested_ = true;
  if (stop_.exchange(static_cast<int>(StopReason::Dispose)) == 0) stopRequestedNs_ = monotonicNs();
  if (state_ == State::Idle && !inHostCall_) {
    teardown();
    return false;
  }
  if (state_ == State::Parked) {
    state_ = State::Queued;
    return true;
  }
  return false;
}

// ----------------------------------------------------------------------------------------------
// Budgets

int Engine::onInterrupt() {
  if (stop_.load(std::memory_order_relaxed) != 0) return 1;
  int64_t deadline = sliceDeadlineNs_.load(std::memory_order_relaxed);
  if (deadline != 0 && monotonicNs() >= deadline) {
    int expected = 0;
    stop_.compare_exchange_strong(expected, static_cast<int>(StopReason::ExecutionBudget));
    return 1;
  }
  return 0;
}

namespace {

// Bytes of stack left below the caller on this thread, or 0 when unknown. Executor threads have a
// known, large stack; the Node main thread's is whatever the process got (often 8 MiB, partly used).
size_t stackRemaining() {
  thread_local uintptr_t low = 0;
  if (low == 0) {
    low = platform::currentThreadStackLow();
    if (low == 0) return 0;
  }
  char here;
  uintptr_t sp = reinterpret_cast<uintptr_t>(&here);
  return sp > low ? sp - low : 0;
}

constexpr size_t kStackReserveBytes = 512 * 1024;  // C frames of built-ins, the regexp engine, JSON
constexpr size_t kCompileReserveBytes = 256 * 1024;

}  // namespace

void Engine::enterGuest(double budgetMs) {
  JS_UpdateStackTop(rt_);
  // The guest's stack budget never exceeds what this thread really has left.
  size_t stack = options_.maxStackSizeBytes;
  size_t remaining = stackRemaining();
  if (remaining > kStackReserveBytes && remaining - kStackReserveBytes < stack) stack = remaining - kStackReserveBytes;
  JS_SetMaxStackSize(rt_, stack);
  budgetMs_ = budgetMs;
  resumeClock();
}

void Engine::resumeClock() {
  sliceStartNs_ = monotonicNs();
  double remainingMs = budgetMs_ - executionMs_;
  if (remainingMs < 0) remainingMs = 0;
  sliceDeadlineNs_.store(sliceStartNs_ + static_cast<int64_t>(remainingMs * 1e6));
}

void Engine::pauseClock() {
  executionMs_ += static_cast<double>(monotonicNs() - sliceStartNs_) / 1e6;
  sliceDeadlineNs_.store(0);
}

void Engine::leaveGuest() { pauseClock(); }

// ----------------------------------------------------------------------------------------------
// Evaluation

bool Engine::compileAndStart(const EvalRequest& request, bool asyncMode, EvalOutcome* out) {
  // Scripts that use top-level await run as async scripts; others keep plain script semantics
  // (their top-level let/const/class stay in the global scope for later evals).
  bool topLevelAwait = request.code.find("await") != std::string::npos;
  int flags = JS_EVAL_TYPE_GLOBAL | JS_EVAL_FLAG_COMPILE_ONLY | (topLevelAwait ? JS_EVAL_FLAG_ASYNC : 0);
  // Compiling gets a small reserve above the limit, so a guest whose data fills the limit can
  // still run the code that frees it (`hoard = null`); execution itself stays under the limit.
  JS_SetMemoryLimit(rt_, options_.memoryLimitBytes + kCompileReserveBytes);
  JSValue fn = JS_Eval(ctx_, request.code.c_str(), request.code.size(), request.filename.c_str(), flags);
  JS_SetMemoryLimit(rt_, options_.memoryLimitBytes);
  if (JS_IsException(fn)) {
    OwnedValue exc(ctx_, JS_GetException(ctx_));
    classifyException(exc.get(), out);
    if (out->status == EvalStatus::GuestError) out->status = EvalStatus::SyntaxError;
    return false;
  }
  JSValue result = JS_EvalFunction(ctx_, fn);
  if (JS_IsException(result)) {
    OwnedValue exc(ctx_, JS_GetException(ctx_));
    classifyException(exc.get(), out);
    return false;
  }
  if (topLevelAwait) evalPromise_ = OwnedValue(ctx_, result);
  else completion_ = OwnedValue(ctx_, result);
  asyncScript_ = topLevelAwait;
  (void)asyncMode;
  return true;
}

void Engine::drainJobs() {
  JSContext* jobCtx;
  while (stop_.load(std::memory_order_relaxed) == 0) {
    int r = JS_ExecutePendingJob(rt_, &jobCtx);
    if (r == 0) break;
    if (r < 0) JS_FreeValue(ctx_, JS_GetException(ctx_));
  }
}

// True when the eval's promise has settled; fills the outcome.
bool Engine::settled(EvalOutcome* out) {
  if (!asyncScript_) {
    // A plain script: its completion value is final. It is never resolved through a promise,
    // which would look up `then` on it and run guest code (a getter, a Proxy trap).
    encodeValueInto(completion_.get(), request_.describeUnserializable, out);
    return true;
  }
  JSPromiseStateEnum st = JS_PromiseState(ctx_, evalPromise_.get());
  if (st == JS_PROMISE_PENDING) return false;
  OwnedValue result(ctx_, JS_PromiseResult(ctx_, evalPromise_.get()));
  if (st == JS_PROMISE_REJECTED) {
    classifyException(result.get(), out);
    return true;
  }
  if (asyncScript_ && JS_IsObject(result.get())) {
    // An async script fulfils with { value: <completion value> }.
    OwnedAtom valueAtom(ctx_, JS_NewAtom(ctx_, "value"));
    OwnedDescriptor d(ctx_);
    if (d.load(result.get(), valueAtom.get()) == 1 && !d.isAccessor()) {
      encodeValueInto(d.desc.value, request_.describeUnserializable, out);
      return true;
    }
  }
  encodeValueInto(result.get(), request_.describeUnserializable, out);
  return true;
}

void Engine::encodeValueInto(JSValueConst v, bool describe, EvalOutcome* out) {
  WireWriter w;
  GuestEncoder enc(ctx_, intrinsics_, w, limits_, describe);
  if (enc.encode(v)) {
    out->status = EvalStatus::Ok;
    out->value = std::move(w.bytes());
    return;
  }
  const CodecError& e = enc.error();
  if (e.status == CodecStatus::GuestException) {
    OwnedValue exc(ctx_, JS_GetException(ctx_));
    classifyException(exc.get(), out);
    if (out->status == EvalStatus::GuestError) {
      out->status = EvalStatus::Unserializable;
      out->message = "the result could not be copied out of the sandbox";
    }
    return;
  }
  out->status = EvalStatus::Unserializable;
  out->message = e.path.empty() ? "the result: " + e.message : "the result at " + e.path + ": " + e.message;
}

void Engine::classifyException(JSValue exc, EvalOutcome* out) {
  StopReason reason = static_cast<StopReason>(stop_.load());
  if (reason != StopReason::None) {
    out->stop = reason;
    out->status = reason == StopReason::Abort     ? EvalStatus::Aborted
                  : reason == StopReason::Dispose ? EvalStatus::Disposed
                                                  : EvalStatus::Timeout;
    return;
  }
  // Only limit errors the engine itself raised during this eval count: a guest can throw a
  // look-alike RangeError or InternalError, or `null`.
  uint32_t raisedOom, raisedOverflow;
  JS_GetRaisedLimitErrors(rt_, &raisedOom, &raisedOverflow);
  bool ranOutOfMemory = raisedOom != raisedOomAtStart_;
  bool nearLimit = memory_.used.load() + (64u << 10) >= options_.memoryLimitBytes;
  if (JS_IsNull(exc) && (ranOutOfMemory || nearLimit)) {
    out->status = EvalStatus::OutOfMemory;
    return;
  }
  if (JS_IsError(exc)) {
    std::string name = errorText(ctx_, exc, "name");
    std::string message = errorText(ctx_, exc, "message");
    if (ranOutOfMemory && name == "InternalError" && message == "out of memory") {
      out->status = EvalStatus::OutOfMemory;
      return;
    }
    if (raisedOverflow != raisedOverflowAtStart_ && name == "RangeError" && message == "Maximum call stack size exceeded") {
      out->status = EvalStatus::StackOverflow;
      return;
    }
  }
  out->status = EvalStatus::GuestError;
  WireWriter w;
  GuestEncoder enc(ctx_, intrinsics_, w, limits_, true);
  if (enc.encode(exc)) {
    out->value = std::move(w.bytes());
  } else {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    if (ranOutOfMemory || nearLimit) out->status = EvalStatus::OutOfMemory;
  }
}

void Engine::clearEvalState() {
  pending_.clear();
  evalPromise_.reset();
  completion_.reset();
  inbox_.clear();
}

void Engine::finish(EvalOutcome* out) {
  StopReason reason = static_cast<StopReason>(stop_.load());
  if (reason != StopReason::None && (out->status == EvalStatus::Ok || reason == StopReason::Dispose)) {
    // A stop that raced with completion: honour dispose; otherwise the result stands.
    if (reason == StopReason::Dispose) {
      out->status = EvalStatus::Disposed;
      out->stop = reason;
      out->value.clear();
    }
  }
  if (reason != StopReason::None || out->status != EvalStatus::Ok) JS_DropPendingJobs(rt_);
  clearEvalState();
  if (out->status == EvalStatus::OutOfMemory) JS_RunGC(rt_);
  out->executionMs = executionMs_;
  out->hostCalls = hostCalls_;
  out->memoryUsedBytes = memoryUsed();
  out->peakMemoryBytes = memoryPeak();
  out->console = std::move(console_.bytes());
  console_.bytes().clear();
  out->consoleTruncated = consoleTruncated_;
  out->evalId = evalId_;
}

void Engine::resetEvalCounters(uint64_t evalId) {
  evalId_ = evalId;
  executionMs_ = 0;
  hostCalls_ = 0;
  consoleTruncated_ = false;
  console_.bytes().clear();
  memory_.peak.store(memory_.used.load());
  asyncScript_ = false;
  JS_GetRaisedLimitErrors(rt_, &raisedOomAtStart_, &raisedOverflowAtStart_);
}

EvalOutcome Engine::evalSync(const EvalRequest& request) {
  EvalOutcome out;
  if (broken_) {
    out.status = EvalStatus::Broken;
    return out;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::Idle || inHostCall_) {
      out.status = EvalStatus::Busy;
      return out;
    }
    state_ = State::Running;
    syncMode_ = true;
    stop_.store(0);
    request_ = request;
  }
  resetEvalCounters(evalId_ + 1);
  enterGuest(request.executionBudgetMs);
  if (compileAndStart(request, false, &out)) {
    drainJobs();
    if (stop_.load() != 0) {
      classifyException(JS_UNDEFINED, &out);
    } else if (!settled(&out)) {
      out.status = EvalStatus::GuestError;
      OwnedValue err(ctx_, JS_NewError(ctx_));
      JS_DefinePropertyValueStr(
          ctx_, err.get(), "message",
          JS_NewString(ctx_, "the script awaits something that evalSync cannot wait for; use eval() instead"),
          JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
      WireWriter w;
      GuestEncoder enc(ctx_, intrinsics_, w, limits_, true);
      if (enc.encode(err.get())) out.value = std::move(w.bytes());
    }
  }
  leaveGuest();
  finish(&out);
  std::lock_guard<std::mutex> lock(mu_);
  syncMode_ = false;
  state_ = State::Idle;
  if (disposeRequested_) teardown();
  return out;
}

// ----------------------------------------------------------------------------------------------
// Async evals

bool Engine::beginAsync(EvalRequest request, uint64_t evalId) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::Idle || inHostCall_ || broken_ || !ctx_) return false;
  request_ = std::move(request);
  stop_.store(0);
  stopRequestedNs_ = 0;
  started_ = false;
  pendingEvalId_ = evalId;
  state_ = State::Queued;
  return true;
}

bool Engine::deliver(HostResult result) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::Idle) return false;  // the eval ended: a late result is dropped
  inbox_.push_back(std::move(result));
  if (state_ == State::Parked) {
    state_ = State::Queued;
    return true;
  }
  return false;
}

bool Engine::requestStop(StopReason reason, uint64_t evalId) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::Idle || evalId != pendingEvalId_) return false;
  int expected = 0;
  if (stop_.compare_exchange_strong(expected, static_cast<int>(reason))) stopRequestedNs_ = monotonicNs();
  if (state_ == State::Parked) {
    state_ = State::Queued;
    return true;
  }
  return false;
}

bool Engine::runSlice() {
  std::vector<HostResult> results;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::Queued) return false;
    state_ = State::Running;
    sliceThreadClock_ = platform::currentThreadCpuClock();
    overdueCpuNs_ = -1;
    results.swap(inbox_);
  }
  EvalOutcome out;
  bool done = false;
  if (!started_) {
    started_ = true;
    resetEvalCounters(pendingEvalId_);
    if (stop_.load() != 0) {
      classifyException(JS_UNDEFINED, &out);
      done = true;
    } else {
      enterGuest(request_.executionBudgetMs);
      done = !compileAndStart(request_, true, &out);
      if (!done) drainJobs();
    }
  } else {
    enterGuest(request_.executionBudgetMs);
    for (HostResult& r : results) {
      auto it = pending_.find(r.callId);
      if (it == pending_.end()) continue;
      PendingCall call = std::move(it->second);
      pending_.erase(it);
      OwnedValue arg;
      bool ok = r.ok;
      if (ok) {
        WireReader reader(r.value.data(), r.value.size());
        GuestDecoder dec(ctx_, intrinsics_, limits_);
        arg = OwnedValue(ctx_, dec.decode(reader));
        if (arg.isException()) {
          JS_FreeValue(ctx_, JS_GetException(ctx_));
          ok = false;
          r.errorName = "TypeError";
          r.errorMessage = "the host result could not be copied into the sandbox: " + dec.error().message;
        }
      }
      if (!ok) {
        OwnedValue err(ctx_, JS_NewError(ctx_));
        JS_DefinePropertyValueStr(ctx_, err.get(), "message",
                                  JS_NewStringLen(ctx_, r.errorMessage.data(), r.errorMessage.size()),
                                  JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
        if (!r.errorName.empty() && r.errorName != "Error")
          JS_DefinePropertyValueStr(ctx_, err.get(), "name", JS_NewStringLen(ctx_, r.errorName.data(), r.errorName.size()),
                                    JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
        arg = std::move(err);
      }
      JSValueConst args[1] = {arg.get()};
      OwnedValue ignored(ctx_, JS_Call(ctx_, (ok ? call.resolve : call.reject).get(), JS_UNDEFINED, 1, args));
      if (ignored.isException()) JS_FreeValue(ctx_, JS_GetException(ctx_));
    }
    drainJobs();
  }
  if (!done) {
    leaveGuest();
    if (stop_.load() != 0) {
      classifyException(JS_UNDEFINED, &out);
      done = true;
    } else if (settled(&out)) {
      done = true;
    } else if (pending_.empty()) {
      out.status = EvalStatus::GuestError;
      OwnedValue err(ctx_, JS_NewError(ctx_));
      JS_DefinePropertyValueStr(
          ctx_, err.get(), "message",
          JS_NewString(ctx_, "the script awaits a promise that can never settle (no host call is pending)"),
          JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
      WireWriter w;
      GuestEncoder enc(ctx_, intrinsics_, w, limits_, true);
      if (enc.encode(err.get())) out.value = std::move(w.bytes());
      done = true;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (abandoned_) {
    // The watchdog already answered this eval; the engine is broken and nobody waits for it.
    state_ = State::Idle;
    lock.unlock();
    teardown();
    return false;
  }
  if (!done) {
    if (!inbox_.empty() || stop_.load() != 0) {
      state_ = State::Queued;  // results or a stop arrived while running: go again
      return true;
    }
    state_ = State::Parked;
    return false;
  }
  lock.unlock();
  finish(&out);
  lock.lock();
  state_ = State::Idle;
  bool disposeNow = disposeRequested_;
  lock.unlock();
  bridge_->postEvalDone(id_, std::move(out));
  if (disposeNow) teardown();
  return false;
}

bool Engine::abandon(int64_t nowNs, int64_t graceNs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != State::Running || abandoned_ || syncMode_) return false;
  int64_t deadline = sliceDeadlineNs_.load();
  bool overdue = (deadline != 0 && nowNs > deadline) || (stop_.load() != 0 && stopRequestedNs_ != 0);
  if (!overdue) {
    overdueCpuNs_ = -1;
    return false;
  }
  // Stuck means "kept burning CPU after it should have stopped": a thread that merely got no CPU
  // (a loaded machine, or a sanitizer build) is not stuck, so measure the thread's own CPU time.
  int64_t cpuNs = platform::threadCpuNs(sliceThreadClock_);
  if (cpuNs < 0) return false;
  if (overdueCpuNs_ < 0) {
    overdueCpuNs_ = cpuNs;
    return false;
  }
  if (cpuNs - overdueCpuNs_ < graceNs) return false;
  abandoned_ = true;
  broken_ = true;
  EvalOutcome out;
  out.status = EvalStatus::Timeout;
  out.stop = stop_.load() != 0 ? static_cast<StopReason>(stop_.load()) : StopReason::ExecutionBudget;
  if (out.stop == StopReason::Abort) out.status = EvalStatus::Aborted;
  if (out.stop == StopReason::Dispose) out.status = EvalStatus::Disposed;
  out.message = "the guest is stuck in a built-in that cannot be interrupted; the sandbox is broken";
  out.evalId = pendingEvalId_;
  out.executionMs = executionMs_ + static_cast<double>(nowNs - sliceStartNs_) / 1e6;
  bridge_->postEvalDone(id_, std::move(out));
  return true;
}

// ----------------------------------------------------------------------------------------------
// Host calls and console

JSValue Engine::callHost(int fnId, bool async, int argc, JSValueConst* argv) {
  if (stop_.load() != 0) return JS_ThrowInternalError(ctx_, "the eval has ended");
  WireWriter w;
  GuestEncoder enc(ctx_, intrinsics_, w, limits_, false);
  if (!enc.encodeArguments(argc, argv)) {
    const CodecError& e = enc.error();
    if (e.status == CodecStatus::GuestException) return JS_EXCEPTION;
    std::string msg = "argument" + (e.path.empty() ? std::string() : " " + e.path) + ": " + e.message;
    return JS_ThrowTypeError(ctx_, "%s", msg.c_str());
  }
  hostCalls_++;
  if (async) {
    if (syncMode_) {
      return JS_ThrowTypeError(ctx_, "async host functions need eval(); evalSync cannot wait for them");
    }
    JSValue funcs[2];
    JSValue promise = JS_NewPromiseCapability(ctx_, funcs);
    if (JS_IsException(promise)) return promise;
    uint32_t callId = nextCallId_++;
    PendingCall& call = pending_[callId];
    call.resolve = OwnedValue(ctx_, funcs[0]);
    call.reject = OwnedValue(ctx_, funcs[1]);
    bridge_->postAsyncCall(id_, evalId_, callId, static_cast<uint32_t>(fnId), std::move(w.bytes()));
    return promise;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    inHostCall_ = true;
  }
  pauseClock();
  HostResult r = bridge_->callSync(id_, static_cast<uint32_t>(fnId), std::move(w.bytes()));
  resumeClock();
  {
    std::lock_guard<std::mutex> lock(mu_);
    inHostCall_ = false;
  }
  if (stop_.load() != 0) return JS_ThrowInternalError(ctx_, "the eval has ended");
  if (!r.ok) {
    JSValue err = JS_NewError(ctx_);
    if (JS_IsException(err)) return err;
    JS_DefinePropertyValueStr(ctx_, err, "message", JS_NewStringLen(ctx_, r.errorMessage.data(), r.errorMessage.size()),
                              JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    if (!r.errorName.empty() && r.errorName != "Error")
      JS_DefinePropertyValueStr(ctx_, err, "name", JS_NewStringLen(ctx_, r.errorName.data(), r.errorName.size()),
                                JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
    return JS_Throw(ctx_, err);
  }
  WireReader reader(r.value.data(), r.value.size());
  GuestDecoder dec(ctx_, intrinsics_, limits_);
  JSValue v = dec.decode(reader);
  if (JS_IsException(v) && dec.error().status != CodecStatus::GuestException)
    return JS_ThrowTypeError(ctx_, "the host result could not be copied into the sandbox: %s", dec.error().message.c_str());
  return v;
}

JSValue Engine::writeConsole(int level, int argc, JSValueConst* argv) {
  if (!options_.captureConsole || consoleTruncated_ || stop_.load() != 0) return JS_UNDEFINED;
  WireWriter w;
  WireLimits consoleLimits = limits_;
  // A loose bound on the raw arguments (UTF-8 text is at most twice their size here); the exact
  // cap on formatted text is applied by src/sandbox.ts.
  size_t rawCap = options_.maxConsoleBytes * 2 + 64;
  consoleLimits.maxBytes = rawCap;
  GuestEncoder enc(ctx_, intrinsics_, w, consoleLimits, true);
  bool ok = enc.encodeArguments(argc, argv);
  if (!ok && enc.error().status == CodecStatus::GuestException) return JS_EXCEPTION;
  if (!ok || console_.size() + w.size() + 5 > rawCap) {
    consoleTruncated_ = true;
    return JS_UNDEFINED;
  }
  console_.u8(static_cast<uint8_t>(level));
  console_.u32(static_cast<uint32_t>(w.size()));
  console_.raw(w.bytes().data(), w.size());
  if (request_.streamConsole && !syncMode_) bridge_->postConsole(id_, evalId_, level, std::move(w.bytes()));
  return JS_UNDEFINED;
}

// ----------------------------------------------------------------------------------------------
// Globals

namespace {

// Walks (creating plain objects as needed) to the parent of the last path segment.
bool parentOf(JSContext* ctx, const std::string& path, OwnedValue* parent, std::string* leaf, std::string* error) {
  *parent = OwnedValue(ctx, JS_GetGlobalObject(ctx));
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string seg = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      *leaf = seg;
      return true;
    }
    OwnedAtom atom(ctx, JS_NewAtomLen(ctx, seg.data(), seg.size()));
    OwnedDescriptor d(ctx);
    int r = d.load(parent->get(), atom.get());
    if (r < 0) {
      JS_FreeValue(ctx, JS_GetException(ctx));
      *error = "cannot read '" + seg + "'";
      return false;
    }
    if (r == 1 && !d.isAccessor() && JS_IsObject(d.desc.value) && !JS_IsProxy(d.desc.value)) {
      *parent = OwnedValue::dup(ctx, d.desc.value);
    } else if (r == 1) {
      *error = "'" + seg + "' exists and is not a plain object";
      return false;
    } else {
      OwnedValue obj(ctx, JS_NewObject(ctx));
      if (JS_DefinePropertyValue(ctx, parent->get(), atom.get(), JS_DupValue(ctx, obj.get()),
                                 JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        *error = "cannot define '" + seg + "'";
        return false;
      }
      *parent = std::move(obj);
    }
    start = dot + 1;
  }
}

}  // namespace

std::string Engine::defineFunction(const std::string& path, uint32_t fnId, bool async) {
  JS_UpdateStackTop(rt_);
  OwnedValue parent;
  std::string leaf, error;
  if (!parentOf(ctx_, path, &parent, &leaf, &error)) return error;
  JSValue data[1] = {JS_NewBool(ctx_, async)};
  JSValue fn = JS_NewCFunctionData2(ctx_, hostTrampoline, leaf.c_str(), 0, static_cast<int>(fnId), 1, data);
  if (JS_IsException(fn)) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return "out of memory";
  }
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, leaf.data(), leaf.size()));
  // Enumerable, so `Object.keys(tools)` lists what a namespace of host functions offers.
  if (JS_DefinePropertyValue(ctx_, parent.get(), atom.get(), fn, JS_PROP_C_W_E) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return "cannot define '" + leaf + "'";
  }
  return std::string();
}

std::string Engine::setGlobal(const std::string& name, const uint8_t* data, size_t size) {
  JS_UpdateStackTop(rt_);
  WireReader reader(data, size);
  GuestDecoder dec(ctx_, intrinsics_, limits_);
  JSValue v = dec.decode(reader);
  if (JS_IsException(v)) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return dec.error().message.empty() ? std::string("out of memory") : dec.error().message;
  }
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, name.data(), name.size()));
  if (JS_DefinePropertyValue(ctx_, global.get(), atom.get(), v, JS_PROP_C_W_E) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return "cannot define global '" + name + "'";
  }
  return std::string();
}

std::string Engine::getGlobal(const std::string& name, std::vector<uint8_t>* out, EvalStatus* status) {
  JS_UpdateStackTop(rt_);
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, name.data(), name.size()));
  OwnedDescriptor d(ctx_);
  int r = d.load(global.get(), atom.get());
  WireWriter w;
  *status = EvalStatus::Ok;
  if (r < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    *status = EvalStatus::GuestError;
    return "cannot read global '" + name + "'";
  }
  if (r == 0) {
    w.tag(Tag::Undefined);
  } else if (d.isAccessor()) {
    *status = EvalStatus::Unserializable;
    return "global '" + name + "' is an accessor; getters are never run";
  } else {
    GuestEncoder enc(ctx_, intrinsics_, w, limits_, false);
    if (!enc.encode(d.desc.value)) {
      if (enc.error().status == CodecStatus::GuestException) JS_FreeValue(ctx_, JS_GetException(ctx_));
      *status = EvalStatus::Unserializable;
      const CodecError& e = enc.error();
      return "global '" + name + "'" + e.path + ": " + e.message;
    }
  }
  *out = std::move(w.bytes());
  return std::string();
}

}  // namespace qjsn
