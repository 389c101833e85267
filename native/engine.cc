#include "engine.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <cstring>

#include "executor.h"
#include "guest_codec.h"
#include "platform.h"
#include "realm.h"

namespace qjsn {

using Phase = EvalLifecycle::Phase;
using Event = EvalLifecycle::Event;

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
  if (stop_.exchange(static_cast<int>(StopReason::Dispose)) == 0) stopRequestedNs_ = monotonicNs();
  bool parked = lifecycle_.phase() == Phase::Parked;
  if (!lifecycle_.apply(Event::DisposeRequested)) return false;
  if (lifecycle_.phase() == Phase::Closed) teardown();
  return parked;  // woken: the slice that answers the eval as disposed frees the runtime
}

void Engine::lifecycleFault(EvalOutcome* out) {
  *out = EvalOutcome();
  out->status = EvalStatus::Broken;
  out->message = "internal error: the sandbox lost track of its eval state";
}

// ----------------------------------------------------------------------------------------------
// Budgets

namespace {

// This thread's CPU clock at the last reading an engine took on it (0: the thread's start). What
// a slice used before its first reading is at most what the thread used since that reading.
thread_local int64_t lastThreadCpuNs = 0;

// This thread's CPU clock; *sinceLastNs gets the CPU time it used since the previous reading.
int64_t readThreadCpu(int64_t* sinceLastNs) {
  int64_t cpu = threadCpuNs();
  *sinceLastNs = cpu - lastThreadCpuNs;
  lastThreadCpuNs = cpu;
  return cpu;
}

// A slice that ends without a poll and ran longer than this wall time reads the CPU clock: the
// wall time of a thread that waited for a core is not the guest's to pay.
constexpr int64_t kUnpolledCpuCheckNs = 1000000;

}  // namespace

int Engine::onInterrupt() {
  if (stop_.load(std::memory_order_relaxed) != 0) return 1;
  if (sliceWallDeadlineNs_.load(std::memory_order_relaxed) == 0) return 0;
  // CPU time never runs faster than wall time: until enough wall time has passed the deadline
  // cannot have been reached, and the monotonic clock is cheap.
  int64_t now = monotonicNs();
  if (now < nextCpuCheckNs_) return 0;
  int64_t cpuSinceLastRead;
  int64_t cpu = readThreadCpu(&cpuSinceLastRead);
  if (cpuMarkNs_ < 0) {
    cpuMarkNs_ = cpu;
    beforeMarkNs_ = std::max<int64_t>(std::min(now - sliceStartNs_, cpuSinceLastRead) - hostNs_, 0);
    hostNs_ = 0;  // counted; host time after the mark moves the CPU deadline instead
    sliceCpuDeadlineNs_.store(cpu + sliceRemainingNs_.load(std::memory_order_relaxed) - beforeMarkNs_);
  }
  int64_t deadline = sliceCpuDeadlineNs_.load(std::memory_order_relaxed);
  if (cpu < deadline) {
    nextCpuCheckNs_ = now + (deadline - cpu);
    return 0;
  }
  int expected = 0;
  stop_.compare_exchange_strong(expected, static_cast<int>(StopReason::ExecutionBudget));
  return 1;
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

// Stack kept below the guest's budget for C frames that run past the engine's checks (built-ins,
// the regexp engine, JSON, raising the overflow error): half of what the thread has left, within
// these bounds. Threads with a small stack (a Worker with resourceLimits.stackSizeMb 0.5) get a
// smaller guest budget, and below kMinGuestStackBytes + kMinStackReserveBytes nothing runs.
constexpr size_t kMaxStackReserveBytes = 512 * 1024;
constexpr size_t kMinStackReserveBytes = 128 * 1024;
constexpr size_t kMinGuestStackBytes = 48 * 1024;
constexpr size_t kCompileReserveBytes = 256 * 1024;

}  // namespace

bool Engine::enterGuest(double budgetMs) {
  budgetMs_ = budgetMs;
  resumeClock();
  return clampStack();
}

bool Engine::clampStack() {
  JS_UpdateStackTop(rt_);
  // The guest's stack budget never exceeds what this thread really has left.
  size_t stack = options_.maxStackSizeBytes;
  size_t remaining = stackRemaining();
  if (remaining != 0) {
    if (remaining < kMinStackReserveBytes + kMinGuestStackBytes) return false;
    size_t reserve = remaining / 2;
    reserve = reserve < kMinStackReserveBytes   ? kMinStackReserveBytes
              : reserve > kMaxStackReserveBytes ? kMaxStackReserveBytes
                                                : reserve;
    if (remaining - reserve < stack) stack = remaining - reserve;
  }
  JS_SetMaxStackSize(rt_, stack);
  return true;
}

std::string Engine::stackRefusal() {
  return "the calling thread has only " + std::to_string(stackRemaining() / 1024) +
         " KiB of stack left; nothing was run (the guest needs at least " +
         std::to_string((kMinStackReserveBytes + kMinGuestStackBytes) / 1024) + " KiB)";
}

void Engine::resumeClock() {
  sliceStartNs_ = monotonicNs();
  double remainingMs = budgetMs_ - executionMs_;
  int64_t remainingNs = remainingMs > 0 ? static_cast<int64_t>(remainingMs * 1e6) : 0;
  cpuMarkNs_ = -1;
  hostNs_ = 0;
  nextCpuCheckNs_ = sliceStartNs_;  // the first poll takes the mark
  sliceRemainingNs_.store(remainingNs);
  sliceCpuDeadlineNs_.store(0);
  sliceWallDeadlineNs_.store(std::max<int64_t>(sliceStartNs_ + remainingNs, 1));  // 0 means "no guest code runs"
}

void Engine::pauseClock() {
  // Not running: a slice that ended the eval leaves the guest again at the end of the slice, and
  // counting it twice doubled the executionMs of async evals stopped in their first slice.
  if (sliceWallDeadlineNs_.load(std::memory_order_relaxed) == 0) return;
  int64_t ranNs;
  int64_t cpuSinceLastRead;
  if (cpuMarkNs_ >= 0) {
    ranNs = beforeMarkNs_ + readThreadCpu(&cpuSinceLastRead) - cpuMarkNs_;
  } else {
    ranNs = monotonicNs() - sliceStartNs_;
    if (ranNs > kUnpolledCpuCheckNs) {
      readThreadCpu(&cpuSinceLastRead);
      ranNs = std::min(ranNs, cpuSinceLastRead);
    }
  }
  executionMs_ += static_cast<double>(std::max<int64_t>(ranNs - hostNs_, 0)) / 1e6;
  hostNs_ = 0;
  sliceWallDeadlineNs_.store(0);
  sliceCpuDeadlineNs_.store(0);
}

void Engine::leaveGuest() { pauseClock(); }

void Engine::excludeHostTime(int64_t ns) {
  if (ns <= 0) return;
  hostNs_ += ns;
  sliceWallDeadlineNs_.fetch_add(ns, std::memory_order_relaxed);
  if (cpuMarkNs_ >= 0) sliceCpuDeadlineNs_.fetch_add(ns, std::memory_order_relaxed);
}

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

// True when the eval has its answer; fills the outcome. The answer is the script's completion value,
// awaited when it is a real promise (a floating async IIFE): its fate is read from the promise's
// internal slots, never through `then`, so no guest getter or Proxy trap runs, and a thenable that
// is not a promise stays a value. Settling happens in drainJobs and host results, inside the budgets.
bool Engine::settled(EvalOutcome* out) {
  if (asyncScript_) {
    JSPromiseStateEnum st = JS_PromiseState(ctx_, evalPromise_.get());
    if (st == JS_PROMISE_PENDING) return false;
    OwnedValue result(ctx_, JS_PromiseResult(ctx_, evalPromise_.get()));
    if (st == JS_PROMISE_REJECTED) {
      classifyException(result.get(), out);
      return true;
    }
    // An async script fulfils with { value: <completion value> }.
    OwnedAtom valueAtom(ctx_, JS_NewAtom(ctx_, "value"));
    OwnedDescriptor d(ctx_);
    bool wrapped = JS_IsObject(result.get()) && d.load(result.get(), valueAtom.get()) == 1 && !d.isAccessor();
    completion_ = OwnedValue::dup(ctx_, wrapped ? d.desc.value : result.get());
    evalPromise_.reset();
    asyncScript_ = false;
  }
  if (!JS_IsPromise(completion_.get())) {
    encodeValueInto(completion_.get(), request_.describeUnserializable, out);
    return true;
  }
  JSPromiseStateEnum st = JS_PromiseState(ctx_, completion_.get());
  if (st == JS_PROMISE_PENDING) return false;
  OwnedValue result(ctx_, JS_PromiseResult(ctx_, completion_.get()));
  if (st == JS_PROMISE_REJECTED) classifyException(result.get(), out);
  else encodeValueInto(result.get(), request_.describeUnserializable, out);
  return true;
}

// For an eval that has not settled and never can (no jobs, no host call in flight). A script still
// at a top-level `await` is an error; a completion promise nothing can settle is the answer itself
// (the host shows it as a promise and hints to await it).
void Engine::neverSettles(const char* awaitMessage, EvalOutcome* out) {
  if (!asyncScript_) {
    encodeValueInto(completion_.get(), request_.describeUnserializable, out);
    return;
  }
  out->status = EvalStatus::GuestError;
  OwnedValue err(ctx_, JS_NewError(ctx_));
  JS_DefinePropertyValueStr(ctx_, err.get(), "message", JS_NewString(ctx_, awaitMessage),
                            JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  WireWriter w;
  GuestEncoder enc(ctx_, intrinsics_, w, limits_, true);
  if (enc.encode(err.get())) out->value = std::move(w.bytes());
}

uint64_t Engine::copyBudgetLeft() const {
  return copiedBytes_ < options_.copyLimitBytes ? options_.copyLimitBytes - copiedBytes_ : 0;
}

WireLimits Engine::copyLimits() const {
  WireLimits limits = limits_;
  if (copyBudgetLeft() < limits.maxBytes) limits.maxBytes = copyBudgetLeft();
  return limits;
}

bool Engine::overCopyBudget(const CodecError& e) const {
  return e.status == CodecStatus::TooLarge && e.overBytes && copyBudgetLeft() <= limits_.maxBytes;
}

void Engine::encodeValueInto(JSValueConst v, bool describe, EvalOutcome* out) {
  WireWriter w;
  WireLimits limits = copyLimits();
  GuestEncoder enc(ctx_, intrinsics_, w, limits, describe);
  if (enc.encode(v)) {
    chargeCopy(w.size());
    out->status = EvalStatus::Ok;
    out->value = std::move(w.bytes());
    return;
  }
  const CodecError& e = enc.error();
  if (overCopyBudget(e)) {
    out->status = EvalStatus::CopyLimit;
    out->message = "the result";
    return;
  }
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
    out->status = reason == StopReason::Abort       ? EvalStatus::Aborted
                  : reason == StopReason::Dispose   ? EvalStatus::Disposed
                  : reason == StopReason::CopyLimit ? EvalStatus::CopyLimit
                                                    : EvalStatus::Timeout;
    if (reason == StopReason::CopyLimit) out->message = "the host-call arguments";
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
    if (raisedOverflow != raisedOverflowAtStart_ && name == "RangeError" &&
        message == "Maximum call stack size exceeded") {
      out->status = EvalStatus::StackOverflow;
      return;
    }
  }
  out->status = EvalStatus::GuestError;
  WireWriter w;
  WireLimits limits = copyLimits();
  GuestEncoder enc(ctx_, intrinsics_, w, limits, true);
  if (enc.encode(exc)) {
    chargeCopy(w.size());
    out->value = std::move(w.bytes());
  } else if (overCopyBudget(enc.error())) {
    out->status = EvalStatus::CopyLimit;
    out->message = "the thrown value";
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
  inboxReady_.store(false, std::memory_order_relaxed);
}

void Engine::finish(EvalOutcome* out) {
  StopReason reason = static_cast<StopReason>(stop_.load());
  if (reason != StopReason::None && (out->status == EvalStatus::Ok || reason == StopReason::Dispose)) {
    // A stop that raced with completion: honour dispose; otherwise the result stands.
    if (reason == StopReason::CopyLimit) {
      out->status = EvalStatus::CopyLimit;
      out->message = "the host-call arguments";
      out->value.clear();
    } else if (reason == StopReason::Dispose) {
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
  copiedBytes_ = 0;
  consoleTruncated_ = false;
  console_.bytes().clear();
  memory_.peak.store(memory_.used.load());
  asyncScript_ = false;
  JS_GetRaisedLimitErrors(rt_, &raisedOomAtStart_, &raisedOverflowAtStart_);
}

EvalOutcome Engine::evalSync(const EvalRequest& request) {
  EvalOutcome out;
  if (lifecycle_.broken()) {
    out.status = EvalStatus::Broken;
    return out;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lifecycle_.apply(Event::BeginSync)) {
      out.status = EvalStatus::Busy;
      return out;
    }
    stop_.store(0);
    request_ = request;
  }
  resetEvalCounters(evalId_ + 1);
  if (!enterGuest(request.executionBudgetMs)) {
    out.status = EvalStatus::StackOverflow;
    out.message = stackRefusal();
  } else if (compileAndStart(request, false, &out)) {
    drainJobs();
    if (stop_.load() != 0) {
      classifyException(JS_UNDEFINED, &out);
    } else if (!settled(&out)) {
      neverSettles("the script awaits something that evalSync cannot wait for; use eval() instead", &out);
    }
  }
  leaveGuest();
  finish(&out);
  std::lock_guard<std::mutex> lock(mu_);
  if (!lifecycle_.apply(Event::EndSync)) lifecycleFault(&out);
  if (lifecycle_.phase() == Phase::Closed) teardown();  // a dispose came during the eval
  return out;
}

// ----------------------------------------------------------------------------------------------
// Async evals

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
  if (evalId != pendingEvalId_) return false;
  bool parked = lifecycle_.phase() == Phase::Parked;
  if (!lifecycle_.apply(Event::StopRequested)) return false;  // the eval ended
  int expected = 0;
  if (stop_.compare_exchange_strong(expected, static_cast<int>(reason))) stopRequestedNs_ = monotonicNs();
  return parked;
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
  bool done = false;
  bool entered = true;
  if (firstSlice) {
    resetEvalCounters(pendingEvalId_);
    if (stop_.load() != 0) {
      classifyException(JS_UNDEFINED, &out);
      done = true;
      entered = false;
    } else {
      if (!enterGuest(request_.executionBudgetMs)) {
        out.status = EvalStatus::StackOverflow;
        out.message = stackRefusal();
        done = true;
        leaveGuest();
      } else if (request_.takeSnapshot) {
        leaveGuest();  // writing runs no guest code: no execution budget applies
        out.snapshotOp = true;
        out.snapshot = writeSnapshot(request_.snapshotExclude, request_.snapshotMaxBytes, &out.value);
        request_.snapshotExclude.clear();
        done = true;
      } else if (request_.restore) {
        out.snapshotOp = true;
        out.snapshot = readSnapshotEntered(request_.snapshotBody.data(), request_.snapshotBody.size());
        request_.snapshotBody = std::vector<uint8_t>();
        leaveGuest();
        done = true;
      } else {
        done = !compileAndStart(request_, true, &out);
        if (done) leaveGuest();  // stop the clock: the execution time counts in the outcome
        else drainJobs();
      }
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
  // Also when the first slice ended the eval (a budget stop, a throw): its time counts.
  if (entered) leaveGuest();
  if (!done) {
    if (stop_.load() != 0) {
      classifyException(JS_UNDEFINED, &out);
      done = true;
    } else if (settled(&out)) {
      done = true;
    } else if (pending_.empty()) {
      neverSettles("the script awaits a promise that can never settle (no host call is pending)", &out);
      done = true;
    }
  }
  // The guest awaits a host call whose answer usually comes back within microseconds: waiting for
  // it here, when a core is free, saves parking and the futex wake-up of a sleeping worker. A wait
  // that missed (a slow host function, a busy event loop) makes the next few waits sleep at once,
  // so a miss costs little CPU overall.
  if (!done && stop_.load() == 0 && !inboxReady_.load(std::memory_order_acquire) && !bridge_->onMainThread()) {
    if (spinSkips_ > 0) {
      spinSkips_--;
    } else if (Executor::instance().beginSpin(true)) {
      bool answered = spinUntil(Executor::kSpinNs, [this] {
        return inboxReady_.load(std::memory_order_acquire) || stop_.load(std::memory_order_relaxed) != 0;
      });
      Executor::instance().endSpin();
      if (!answered) spinSkips_ = kSpinSkipsAfterMiss;
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (done && lifecycle_.phase() != Phase::Abandoned) {
    lock.unlock();
    finish(&out);
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
  if (lifecycle_.phase() != Phase::Running) return false;  // only an async slice can be abandoned
  // Stuck means "kept burning CPU after it should have stopped": a thread that merely got no CPU
  // (a loaded machine, or a sanitizer build) is not stuck, so everything here is the thread's own
  // CPU time, like the budget itself.
  // A slice that never polled the interrupt handler (a built-in that ignores it) has no CPU mark:
  // it is judged overdue by wall time, then stuck by CPU time as well.
  int64_t cpuNs = sliceCpuClock_.nowNs();
  if (cpuNs < 0) return false;
  int64_t cpuDeadline = sliceCpuDeadlineNs_.load();
  int64_t wallDeadline = sliceWallDeadlineNs_.load();
  int64_t remainingNs = sliceRemainingNs_.load();
  int64_t nowNs = monotonicNs();
  bool overdue = (cpuDeadline != 0 ? cpuNs > cpuDeadline : wallDeadline != 0 && nowNs > wallDeadline) ||
                 (stop_.load() != 0 && stopRequestedNs_ != 0);
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
  // This slice so far: the deadlines are "where the slice's time reaches its remaining budget".
  int64_t sliceNs = cpuDeadline != 0    ? remainingNs + cpuNs - cpuDeadline
                    : wallDeadline != 0 ? remainingNs + nowNs - wallDeadline
                                        : 0;
  out.executionMs = executionMs_ + static_cast<double>(sliceNs) / 1e6;
  out.hostCalls = hostCalls_.load(std::memory_order_relaxed);
  out.memoryUsedBytes = memoryUsed();
  out.peakMemoryBytes = memoryPeak();
  bridge_->postEvalDone(id_, std::move(out));
  return true;
}

// ----------------------------------------------------------------------------------------------
// Host calls and console

JSValue Engine::callHost(int fnId, bool async, int argc, JSValueConst* argv) {
  if (stop_.load() != 0) return JS_ThrowInternalError(ctx_, "the eval has ended");
  // Inline evals run on the main thread: primitives can go straight to the host function.
  JSValue fast;
  if (!async && lifecycle_.syncRunning() && argc <= kMaxPrimitiveArgs &&
      callHostPrimitive(static_cast<uint32_t>(fnId), argc, argv, &fast))
    return fast;
  WireWriter w;
  WireLimits limits = copyLimits();
  GuestEncoder enc(ctx_, intrinsics_, w, limits, false);
  if (!enc.encodeArguments(argc, argv)) {
    const CodecError& e = enc.error();
    if (e.status == CodecStatus::GuestException) return JS_EXCEPTION;
    if (overCopyBudget(e)) return stopOverCopyLimit();
    std::string msg = "argument" + (e.path.empty() ? std::string() : " " + e.path) + ": " + e.message;
    return JS_ThrowTypeError(ctx_, "%s", msg.c_str());
  }
  chargeCopy(w.size());
  hostCalls_++;
  if (async) {
    if (lifecycle_.syncRunning()) {
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
    if (!lifecycle_.apply(Event::HostCallStarted)) return JS_ThrowInternalError(ctx_, "the eval has ended");
  }
  pauseClock();
  HostResult r = bridge_->callSync(id_, static_cast<uint32_t>(fnId), std::move(w.bytes()));
  resumeClock();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lifecycle_.apply(Event::HostCallEnded)) return JS_ThrowInternalError(ctx_, "the eval has ended");
  }
  if (stop_.load() != 0) return JS_ThrowInternalError(ctx_, "the eval has ended");
  return syncResultToGuest(r);
}

// False, having done nothing, when an argument is not a primitive this path carries.
bool Engine::callHostPrimitive(uint32_t fnId, int argc, JSValueConst* argv, JSValue* out) {
  Primitive args[kMaxPrimitiveArgs];
  std::optional<GuestUtf16> texts[kMaxPrimitiveArgs];
  for (int i = 0; i < argc; i++) {
    JSValueConst v = argv[i];
    Primitive& a = args[i];
    switch (JS_VALUE_GET_NORM_TAG(v)) {
      case JS_TAG_UNDEFINED: a.kind = Primitive::Kind::Undefined; break;
      case JS_TAG_NULL: a.kind = Primitive::Kind::Null; break;
      case JS_TAG_BOOL:
        a.kind = Primitive::Kind::Boolean;
        a.number = JS_VALUE_GET_BOOL(v);
        break;
      case JS_TAG_INT:
        a.kind = Primitive::Kind::Number;
        a.number = JS_VALUE_GET_INT(v);
        break;
      case JS_TAG_FLOAT64:
        a.kind = Primitive::Kind::Number;
        a.number = JS_VALUE_GET_FLOAT64(v);
        break;
      case JS_TAG_STRING: {
        GuestUtf16& t = texts[i].emplace(ctx_, v);
        if (!t.ok()) {
          *out = JS_EXCEPTION;  // out of memory, already thrown
          return true;
        }
        if (t.size() > kMaxPrimitiveChars) return false;
        a.kind = Primitive::Kind::String;
        a.text = std::u16string_view(reinterpret_cast<const char16_t*>(t.data()), t.size());
        break;
      }
      default: return false;
    }
  }
  hostCalls_++;
  // An inline eval holds the engine Running on this thread, so nothing else can enter it while the
  // host function runs: only its time is kept out of the budget. These calls are many and short,
  // so that time is read from the coarse clock (unbiased over many calls, nearly free) rather
  // than by pausing and resuming the execution clock (two precise clock reads a call).
  Primitive result;
  std::u16string text;
  HostResult fallback;
  int64_t hostStartNs = coarseMonotonicNs();
  bool primitive = bridge_->callSyncPrimitive(id_, fnId, args, argc, &result, &text, &fallback);
  excludeHostTime(coarseMonotonicNs() - hostStartNs);
  if (stop_.load() != 0) {
    *out = JS_ThrowInternalError(ctx_, "the eval has ended");
    return true;
  }
  if (!primitive) {
    *out = syncResultToGuest(fallback);
    return true;
  }
  switch (result.kind) {
    case Primitive::Kind::Undefined: *out = JS_UNDEFINED; break;
    case Primitive::Kind::Null: *out = JS_NULL; break;
    case Primitive::Kind::Boolean: *out = JS_NewBool(ctx_, result.number != 0); break;
    case Primitive::Kind::Number: {
      // The codec's rule: an integer in int32 range (not -0) is an int, anything else a float.
      double d = result.number;
      bool isInt = d >= -2147483648.0 && d <= 2147483647.0 && d == static_cast<double>(static_cast<int32_t>(d)) &&
                   !(d == 0 && std::signbit(d));
      *out = isInt ? JS_NewInt32(ctx_, static_cast<int32_t>(d)) : JS_NewFloat64(ctx_, d);
      break;
    }
    case Primitive::Kind::String:
      *out = JS_NewStringUTF16(ctx_, reinterpret_cast<const uint16_t*>(text.data()), text.size());
      break;
  }
  return true;
}

JSValue Engine::syncResultToGuest(const HostResult& r) {
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

// Ends the eval: its host-call arguments would take the host past the eval's copy budget. The
// error is uncatchable, like an interrupt, so the guest cannot retry smaller pieces forever.
JSValue Engine::stopOverCopyLimit() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int expected = 0;
    if (stop_.compare_exchange_strong(expected, static_cast<int>(StopReason::CopyLimit)))
      stopRequestedNs_ = monotonicNs();
  }
  JSValue err = JS_NewError(ctx_);
  if (JS_IsException(err)) return err;
  JS_DefinePropertyValueStr(ctx_, err, "message", JS_NewString(ctx_, "the eval's copy limit ran out"),
                            JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  JS_SetUncatchableError(ctx_, err);
  return JS_Throw(ctx_, err);
}

JSValue Engine::writeConsole(int level, int argc, JSValueConst* argv) {
  if (!options_.captureConsole || consoleTruncated_ || stop_.load() != 0) return JS_UNDEFINED;
  WireWriter w;
  WireLimits consoleLimits = limits_;
  // A loose bound on the raw arguments (UTF-8 text is at most twice their size here); the exact
  // cap on formatted text is applied by src/sandbox.ts.
  size_t rawCap = options_.maxConsoleBytes * 2 + 64;
  consoleLimits.maxBytes = rawCap;
  uint64_t copyLeft = copyLimits().maxBytes;
  if (copyLeft < consoleLimits.maxBytes) consoleLimits.maxBytes = copyLeft;
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
  chargeCopy(5 + w.size());
  if (request_.streamConsole && !lifecycle_.syncRunning()) {
    chargeCopy(w.size());  // a second copy goes to the host at once
    bridge_->postConsole(id_, evalId_, level, std::move(w.bytes()));
  }
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
  if (!clampStack()) return stackRefusal();
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
  if (!clampStack()) return stackRefusal();
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
  if (!clampStack()) {
    *status = EvalStatus::StackOverflow;
    return stackRefusal();
  }
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

std::vector<std::string> Engine::globalNames(size_t limit) {
  std::vector<std::string> names;
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  JSPropertyEnum* props = nullptr;
  uint32_t count = 0;
  if (JS_GetOwnPropertyNames(ctx_, &props, &count, global.get(), JS_GPN_STRING_MASK) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));  // out of memory: no names
    return names;
  }
  for (uint32_t i = 0; i < count && names.size() < limit; i++) {
    size_t length = 0;
    const char* name = JS_AtomToCStringLen(ctx_, &length, props[i].atom);
    if (!name) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      break;
    }
    names.emplace_back(name, length);
    JS_FreeCString(ctx_, name);
  }
  JS_FreePropertyEnum(ctx_, props, count);
  return names;
}

}  // namespace qjsn
