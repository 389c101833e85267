// One eval from code to outcome: compile and start, run jobs, settle the completion value, and
// turn results, throws and stops into an EvalOutcome. evalSync runs it all on the calling thread.
#include <string>
#include <utility>

#include "engine.h"

namespace qjsn {

using Phase = EvalLifecycle::Phase;
using Event = EvalLifecycle::Event;

namespace {

// Memory the compiler may use above the limit (see compileAndStart).
// What a copy limit stop of a running eval counts (src/outcomes.ts says it would take the host past the limit).
constexpr const char* kHostCallsCopied = "the host-call arguments and the state of calls in flight";
constexpr size_t kCompileReserveBytes = 256 * 1024;

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

bool Engine::compileAndStart(const EvalRequest& request, EvalOutcome* out) {
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
  GuestEncoder enc(ctx_, intrinsics_, w, limits, describe, request_.resultDisplay);
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
    out->status = reason == StopReason::Abort           ? EvalStatus::Aborted
                  : reason == StopReason::Dispose       ? EvalStatus::Disposed
                  : reason == StopReason::CopyLimit     ? EvalStatus::CopyLimit
                  : reason == StopReason::HostCallLimit ? EvalStatus::HostCallLimit
                                                        : EvalStatus::Timeout;
    if (reason == StopReason::CopyLimit) out->message = kHostCallsCopied;
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
  GuestEncoder enc(ctx_, intrinsics_, w, limits, true, request_.thrownDisplay);
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
  hostCalls_.clear();
  evalPromise_.reset();
  completion_.reset();
  inbox_.clear();
  inboxReady_.store(false, std::memory_order_relaxed);
}

void Engine::finish(EvalOutcome* out) {
  StopReason reason = static_cast<StopReason>(stop_.load());
  if (reason != StopReason::None && (out->status == EvalStatus::Ok || reason == StopReason::Dispose)) {
    // A stop that raced with completion: honour dispose; otherwise the result stands.
    if (reason == StopReason::CopyLimit || reason == StopReason::HostCallLimit) {
      out->status = reason == StopReason::CopyLimit ? EvalStatus::CopyLimit : EvalStatus::HostCallLimit;
      if (reason == StopReason::CopyLimit) out->message = kHostCallsCopied;
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
  out->executionMs = clock_.executionMs();
  out->hostCalls = hostCalls_.calls();
  out->memoryUsedBytes = memoryUsed();
  out->peakMemoryBytes = memoryPeak();
  out->console = std::move(console_.bytes());
  console_.bytes().clear();
  out->consoleTruncated = consoleTruncated_;
  out->evalId = evalId_;
}

void Engine::resetEvalCounters(uint64_t evalId) {
  evalId_ = evalId;
  clock_.resetExecution();
  hostCalls_.resetCount();
  copiedBytes_ = 0;
  consoleTruncated_ = false;
  console_.bytes().clear();
  memory_.peak.store(memory_.used.load());
  asyncScript_ = false;
  JS_GetRaisedLimitErrors(rt_, &raisedOomAtStart_, &raisedOverflowAtStart_);
}

EvalOutcome Engine::evalSync(EvalRequest request) {
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
    request_ = std::move(request);
  }
  resetEvalCounters(evalId_ + 1);
  if (!enterGuest(request_.executionBudgetMs)) {
    out.status = EvalStatus::StackOverflow;
    out.message = stackRefusal();
  } else if (compileAndStart(request_, &out)) {
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

}  // namespace qjsn
