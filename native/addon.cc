// Module init and the JS-visible handle of every sandbox, the delivery of what executor threads
// posted (native/env_bridge.h) to its handle, and the cleanup hook that frees every live runtime
// when the environment goes away.
//
// The handle is internal: src/sandbox.ts keeps it in a private field and validates every argument
// before calling in, so the guards here are cheap one-liners that only keep the process alive.
#include <napi.h>

#include <optional>
#include <unordered_set>
#include <utility>

#include "env_bridge.h"
#include "executor.h"
#include "handle_args.h"
#include "primitive_call.h"
#include "process_facts.h"
#include "reaper.h"

namespace qjsn {

namespace {

const napi_type_tag kHandleTag = {0x7a1c5e0d2f4b4c11ULL, 0x9e3b6a85d0c2f417ULL};

}  // namespace

class SandboxHandle : public Napi::ObjectWrap<SandboxHandle> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "SandboxHandle",
                       {
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
  // The module's evalSync (EvalSyncOf), finding handles in `bridge`.
  static Napi::Function DefineEvalSync(Napi::Env env, EnvBridge* bridge) {
    return Napi::Function::New(env, EvalSyncOf, "evalSync", bridge);
  }

  // new SandboxHandle(memoryLimit, maxStack, captureConsole, maxConsoleBytes, dispatcher, primitiveDispatcher, copyLimit)
  SandboxHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SandboxHandle>(info) {
    Napi::Env env = info.Env();
    bridge_ = env.GetInstanceData<std::shared_ptr<EnvBridge>>()->get()->shared_from_this();
    HandleArgs args(info);
    if (!args.has(6) || !args.isFunction(4) || !args.isFunction(5)) {
      Napi::TypeError::New(env, "SandboxHandle: bad arguments").ThrowAsJavaScriptException();
      return;
    }
    EngineOptions o;
    o.memoryLimitBytes = static_cast<size_t>(args.u64(0));
    o.maxStackSizeBytes = static_cast<size_t>(args.u64(1));
    o.captureConsole = args.flag(2);
    o.maxConsoleBytes = static_cast<size_t>(args.u64(3));
    o.copyLimitBytes = args.has(7) ? args.u64(6) : o.memoryLimitBytes;
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
    info.This().As<Napi::Object>().DefineProperty(Napi::PropertyDescriptor::Value("id", Napi::Number::New(env, id_)));
    bridge_->registerHandle(id_, this);
    // V8 sees only a small wrapper object; tell it what the runtime behind it costs so forgotten
    // (never disposed) sandboxes get collected before thousands pile up.
    externalBytes_ = static_cast<int64_t>(engine_->memoryUsed()) + kHandleOverheadBytes;
    Napi::MemoryManagement::AdjustExternalMemory(env, externalBytes_);
  }

  ~SandboxHandle() override { release(); }

  void release() {
    if (!engine_) return;
    bool freedOffThread = false;
    switch (engine_->dispose()) {
      case Engine::AfterDispose::Schedule: Executor::instance().schedule(engine_); break;
      case Engine::AfterDispose::Release:
        // A big heap takes long to free: not on the main thread, which every session shares.
        freedOffThread = engine_->memoryUsed() > kFreeInPlaceMaxBytes;
        if (freedOffThread) freeOffThread(std::move(engine_));
        break;
      case Engine::AfterDispose::Nothing: break;
    }
    engine_.reset();
    // After dispose(): the guest waiting for this answer sees its eval stopped when it wakes.
    if (parkedSlot_) EnvBridge::finishSlot(std::exchange(parkedSlot_, nullptr), EnvBridge::closedResult());
    Napi::MemoryManagement::AdjustExternalMemory(Env(), -externalBytes_);
    if (!freedOffThread) returnMemoryToSystem(externalBytes_);  // the reaper counts what it frees
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
    dispatcher_.Call({Napi::Number::New(env, kind(DispatchKind::AsyncCall)), Napi::Number::New(env, fnId),
                      Napi::Number::New(env, callId), Napi::Number::New(env, argLength), spill,
                      Napi::Number::New(env, static_cast<double>(evalId))});
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
    dispatcher_.Call({Napi::Number::New(env, kind(DispatchKind::Console)), Napi::Number::New(env, level),
                      Napi::Number::New(env, 0), Napi::Number::New(env, argLength), spill,
                      Napi::Number::New(env, static_cast<double>(evalId))});
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
    Napi::Value ret = dispatcher_.Call({Napi::Number::New(env, kind(DispatchKind::SyncCall)),
                                        Napi::Number::New(env, fnId), Napi::Number::New(env, token),
                                        Napi::Number::New(env, argLength), spill, Napi::Number::New(env, 0)});
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
    return bridge_->hostResultOf(ret);
  }

  // The fast path of a sync host call on the main thread: primitiveDispatcher(fnId * 4 + argc, ...args)
  // gets the primitives as they are and answers with a primitive, [bytes] (the codec's answer, as
  // dispatcher's) or [name, message].
  bool syncCallPrimitive(PrimitiveCall* call) {
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
      call->fallback = EnvBridge::closedResult();
      return false;
    }
    return callPrimitiveDispatcher(env, {p.dispatcher, p.undefined}, call, *bridge_);
  }

 private:
  void closePrimitiveScope() {
    if (primitiveScope_.scope != nullptr) napi_close_handle_scope(Env(), primitiveScope_.scope);
    primitiveScope_ = PrimitiveScope();
  }

  // What a direct call answers while an eval is active.
  static Napi::Value busyError(Napi::Env env) {
    return errorToJs(env, NativeError{ErrorCode::Busy, "an eval is running in this sandbox"});
  }

  bool alive(const Napi::CallbackInfo& info) {
    bool tagged = false;
    napi_check_object_type_tag(info.Env(), info.This(), &kHandleTag, &tagged);
    if (!tagged || !engine_) {
      disposedError(info.Env());
      return false;
    }
    return true;
  }
  static void disposedError(Napi::Env env) {
    Napi::Error::New(env, "DISPOSED: the sandbox is disposed").ThrowAsJavaScriptException();
  }

  static int kind(DispatchKind k) { return static_cast<int>(k); }

  // (code, filename, budgetMs, describe, evalId, streamConsole) of evalSync and evalAsync, with the
  // optional copy for display (resultParts, thrownParts, depth) from argument `displayAt` on
  // (missing: an exact copy, and nothing more to read).
  static EvalRequest requestOf(const HandleArgs& args, size_t displayAt) {
    EvalRequest r;
    r.code = args.utf8(0);
    r.filename = args.utf8(1);
    r.executionBudgetMs = args.number(2);
    r.describeUnserializable = args.flag(3);
    r.streamConsole = displayAt > 5 && args.flag(5);
    if (args.has(displayAt + 3)) {
      uint32_t depth = args.u32(displayAt + 2);
      r.resultDisplay = {args.u32(displayAt), depth};
      r.thrownDisplay = {args.u32(displayAt + 1), depth};
    }
    return r;
  }

  // evalSync(sandboxId, code, filename, budgetMs, describe[, resultParts, thrownParts, depth]) -> answerHere
  // A function of the module, not a method: the sandbox id finds the handle in one lookup, where
  // a method pays for unwrapping its receiver and checking its type tag, a tenth of a trivial eval.
  static Napi::Value EvalSyncOf(const Napi::CallbackInfo& info) {
    SandboxHandle* handle = static_cast<EnvBridge*>(info.Data())->handleOf(HandleArgs(info).u32(0));
    if (!handle) {
      disposedError(info.Env());
      return info.Env().Undefined();
    }
    // Nothing else keeps the handle's wrapper alive while host functions run (they may drop it).
    handle->Ref();
    Napi::Value answer = handle->EvalSync(info.Env(), HandleArgs(info, 1));
    handle->Unref();
    return answer;
  }

  Napi::Value EvalSync(Napi::Env env, const HandleArgs& args) {
    if (!args.has(4)) return env.Undefined();
    std::shared_ptr<Engine> keep = engine_;
    // A host function may call evalSync here again (refused as busy): it must leave the outer
    // eval's scope open. Each call closes only the scope its own eval opened.
    PrimitiveScope outer = std::exchange(primitiveScope_, PrimitiveScope());
    EvalOutcome o = keep->evalSync(requestOf(args, 4));
    closePrimitiveScope();
    primitiveScope_ = outer;
    return answerHere(env, o);
  }

  // An eval's outcome for a caller that reads it at once, without building an array: the numbers
  // go into the environment's shared stats array and a value that fits into the exchange buffer;
  // only console output, a message or an oversized value come back as JS values, as
  // [value | undefined, message, console] (src/outcomes.ts syncOutcome reads them).
  Napi::Value answerHere(Napi::Env env, const EvalOutcome& o) {
    EnvBridge& b = *bridge_;
    b.stat(StatsSlot::status) = static_cast<int>(o.status);
    b.stat(StatsSlot::stop) = static_cast<int>(o.stop);
    b.stat(StatsSlot::consoleTruncated) = o.consoleTruncated ? 1 : 0;
    b.stat(StatsSlot::executionMs) = o.executionMs;
    b.stat(StatsSlot::hostCalls) = o.hostCalls;
    b.stat(StatsSlot::memoryUsedBytes) = static_cast<double>(o.memoryUsedBytes);
    b.stat(StatsSlot::peakMemoryBytes) = static_cast<double>(o.peakMemoryBytes);
    Napi::Value spill = env.Undefined();
    double& valueLength = b.stat(StatsSlot::valueLength);
    bool spilled = o.value.size() > EnvBridge::kExchangeBytes;  // as stage() decides
    valueLength = o.value.empty() ? -1 : b.stage(o.value, &spill);
    if (spilled) valueLength = -1;
    if (!spilled && o.message.empty() && o.console.empty()) return spill;
    Napi::Array extras = Napi::Array::New(env, 3);
    extras.Set(0u, spill);
    extras.Set(1u, Napi::String::New(env, o.message));
    extras.Set(2u, o.console.empty()
                       ? env.Undefined()
                       : Napi::Buffer<uint8_t>::Copy(env, o.console.data(), o.console.size()).As<Napi::Value>());
    return extras;
  }

  // evalAsync(code, filename, budgetMs, describe, evalId, streamConsole, inline, answerNow[,
  // resultParts, thrownParts, depth[, excludedNames, maxBytes]]) -> Promise<outcome array>; when
  // `answerNow` and the eval ended within the main thread's short wait for it
  // (EnvBridge::takeOutcome), the outcome as evalSync answers it (answerHere); null when busy.
  // With excludedNames, a snapshot is written after an eval that was not stopped, as
  // writeSnapshotAsync would, into the outcome's index 10 (never with answerNow).
  Napi::Value EvalAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(5)) return env.Undefined();
    if (engine_->broken()) return env.Null();
    EvalRequest r = requestOf(args, 8);
    if (args.has(13) && args.isArray(11)) {
      r.snapshotAfter = true;
      r.snapshotExclude = args.utf16Set(11);
      r.snapshotMaxBytes = args.u64(12);
    }
    return startAsync(env, std::move(r), args.u64(4), args.flag(6), args.flag(7));
  }

  // restoreAsync(body, budgetMs, evalId) -> Promise<outcome array with [status, message, [name, type, ...]]
  // at index 10>; null when busy. Runs on an executor thread like an eval: re-created functions
  // and classes run guest code, which never runs on the Node main thread this way.
  Napi::Value RestoreAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(3)) return env.Undefined();
    if (engine_->broken()) return env.Null();
    EvalRequest r;
    r.restore = true;
    r.snapshotBody = args.bytes(0);
    r.executionBudgetMs = args.number(1);
    return startAsync(env, std::move(r), args.u64(2));
  }

  // writeSnapshotAsync(excludedNames, maxBytes, evalId) -> Promise<outcome array with
  // [status, body | message, [name, type, ...]] at index 10>; null when busy.
  Napi::Value WriteSnapshotAsync(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(3) || !args.isArray(0)) return env.Undefined();
    if (engine_->broken()) return env.Null();
    EvalRequest r;
    r.takeSnapshot = true;
    r.snapshotExclude = args.utf16Set(0);
    r.snapshotMaxBytes = args.u64(1);
    return startAsync(env, std::move(r), args.u64(2));
  }

  Napi::Value startAsync(Napi::Env env, EvalRequest request, uint64_t evalId, bool runInline = false,
                         bool answerNow = false) {
    if (deferred_ || !engine_->beginAsync(std::move(request), evalId)) return env.Null();
    evalId_ = evalId;
    inline_ = runInline;
    if (answerNow && !runInline) {
      // No JavaScript runs until this returns, so nothing sees the eval without its promise.
      bridge_->expectOutcome(id_, evalId);
      Executor::instance().schedule(engine_);
      std::optional<EvalOutcome> outcome = bridge_->takeOutcome([this] { return engine_->awaitingSlice(); });
      if (outcome) return answerHere(env, *outcome);
      deferred_.emplace(Napi::Promise::Deferred::New(env));
      bridge_->evalStarted();
      return deferred_->Promise();
    }
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
    HandleArgs args(info);
    if (!alive(info) || !args.has(2)) return info.Env().Undefined();
    auto reason = static_cast<StopReason>(args.i32(0));
    if (reason != StopReason::WallBudget && reason != StopReason::Abort) return info.Env().Undefined();
    if (engine_->requestStop(reason, args.u64(1))) run();
    return info.Env().Undefined();
  }

  // answerSync(token, bytes in the exchange buffer | Buffer | [name, message]): see syncCall.
  Napi::Value AnswerSync(const Napi::CallbackInfo& info) {
    HandleArgs args(info);
    if (!alive(info) || !args.has(2)) return info.Env().Undefined();
    if (parkedSlot_ && args.u32(0) == parkedToken_)
      EnvBridge::finishSlot(std::exchange(parkedSlot_, nullptr), bridge_->hostResultOf(info[1]));
    return info.Env().Undefined();
  }

  // settle(callId, ok, bytes | [name, message], collect): with `collect`, the guest's next host
  // call is taken and dispatched here when it comes at once (src/host-calls.ts says when it may).
  Napi::Value Settle(const Napi::CallbackInfo& info) {
    HandleArgs args(info);
    if (!alive(info) || !args.has(3)) return info.Env().Undefined();
    HostResult r;
    r.callId = args.u32(0);
    r.ok = args.flag(1);
    if (r.ok) {
      r.value = bridge_->resultBytes(info[2]);
    } else if (info[2].IsArray()) {
      Napi::Array a = info[2].As<Napi::Array>();
      r.errorName = a.Get(0u).ToString().Utf8Value();
      r.errorMessage = a.Get(1u).ToString().Utf8Value();
    }
    bool parked = engine_->deliver(std::move(r));
    if (inline_) {
      if (parked) runInline();
      return info.Env().Undefined();
    }
    // The guest goes on: in the slice still waiting for this result, or in the one queued now.
    if (parked) Executor::instance().schedule(engine_);
    std::shared_ptr<EnvBridge> bridge = bridge_;  // a host function may dispose this handle
    if (!args.flag(3)) bridge->awaitReply();
    else if (bridge->collectNextCall()) bridge->drain();
    return info.Env().Undefined();
  }

  // defineFunction(path, fnId, async) -> undefined | { code, message }
  Napi::Value DefineFunction(const Napi::CallbackInfo& info) {
    HandleArgs args(info);
    if (!alive(info) || !args.has(3)) return info.Env().Undefined();
    if (engine_->busy()) return busyError(info.Env());
    return errorToJs(info.Env(), engine_->defineFunction(args.utf8(0), args.u32(1), args.flag(2)));
  }

  // defineFrozenFunction(name, fnId) -> true (installed) | false (the guest keeps its own) | { code, message }
  Napi::Value DefineFrozenFunction(const Napi::CallbackInfo& info) {
    HandleArgs args(info);
    if (!alive(info) || !args.has(2)) return info.Env().Undefined();
    if (engine_->busy()) return busyError(info.Env());
    bool installed = false;
    std::optional<NativeError> error = engine_->defineFrozenFunction(args.utf8(0), args.u32(1), &installed);
    if (error) return errorToJs(info.Env(), error);
    return Napi::Boolean::New(info.Env(), installed);
  }

  // setGlobal(name, bytes) -> undefined | { code, message }
  Napi::Value SetGlobal(const Napi::CallbackInfo& info) {
    HandleArgs args(info);
    if (!alive(info) || !args.has(2)) return info.Env().Undefined();
    if (engine_->busy()) return busyError(info.Env());
    std::vector<uint8_t> bytes = args.bytes(1);
    return errorToJs(info.Env(), engine_->setGlobal(args.utf8(0), bytes.data(), bytes.size()));
  }

  // getGlobal(name) -> [status, bytes | message]
  Napi::Value GetGlobal(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(1)) return env.Undefined();
    Napi::Array a = Napi::Array::New(env, 2);
    if (engine_->busy()) {
      a.Set(0u, Napi::Number::New(env, static_cast<int>(EvalStatus::Busy)));
      return a;
    }
    std::vector<uint8_t> out;
    EvalStatus status;
    std::string err = engine_->getGlobal(args.utf8(0), &out, &status);
    a.Set(0u, Napi::Number::New(env, static_cast<int>(status)));
    if (err.empty()) a.Set(1u, Napi::Buffer<uint8_t>::Copy(env, out.data(), out.size()));
    else a.Set(1u, Napi::String::New(env, err));
    return a;
  }

  // globalNames(limit) -> string[] | { code: "BUSY", message }
  Napi::Value GlobalNames(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(1) || !args.isNumber(0)) return env.Undefined();
    if (engine_->busy()) return busyError(env);
    std::vector<std::string> names = engine_->globalNames(args.u32(0));
    Napi::Array a = Napi::Array::New(env, names.size());
    for (size_t i = 0; i < names.size(); i++) a.Set(static_cast<uint32_t>(i), Napi::String::New(env, names[i]));
    return a;
  }

  // writeSnapshot(excludedNames, maxBytes) -> [status, body | message, [name, type, ...]] | { code: "BUSY", message }
  Napi::Value WriteSnapshot(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(2) || !args.isArray(0)) return env.Undefined();
    if (engine_->busy()) return busyError(env);
    std::vector<uint8_t> body;
    SnapshotResult r = engine_->writeSnapshot(args.utf16Set(0), args.u64(1), &body);
    Napi::Value payload = env.Undefined();
    if (r.status == SnapshotStatus::Ok) payload = Napi::Buffer<uint8_t>::Copy(env, body.data(), body.size());
    return snapshotResultToJs(env, r, payload);
  }

  // readSnapshot(body, budgetMs) -> [status, undefined | message, [name, type, ...]] | { code: "BUSY", message }
  Napi::Value ReadSnapshot(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(2)) return env.Undefined();
    if (engine_->busy()) return busyError(env);
    std::vector<uint8_t> body = args.bytes(0);
    SnapshotResult r = engine_->readSnapshot(body.data(), body.size(), args.number(1));
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
    HandleArgs args(info);
    if (!alive(info) || !args.has(3)) return env.Undefined();
    return Napi::Boolean::New(env, engine_->setClock(args.flag(0), args.number(1), args.flag(2)));
  }

  // setRandomSeed(seed: integer below 2**53) -> false when busy
  Napi::Value SetRandomSeed(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(1)) return env.Undefined();
    double seed = args.number(0);
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

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto bridge = std::make_shared<EnvBridge>(env);
  bridge->start();
  env.SetInstanceData(new std::shared_ptr<EnvBridge>(bridge));
  env.AddCleanupHook([bridge]() { bridge->closeAll(); });
  exports.Set("SandboxHandle", SandboxHandle::Define(env));
  exports.Set("evalSync", SandboxHandle::DefineEvalSync(env, bridge.get()));
  exports.Set("exchange", bridge->exchange());
  exports.Set("syncStats", bridge->statsArray());
  exports.Set("primitiveSlots", bridge->primitiveSlotsArray());
  exportProcessFacts(env, exports);
  return exports;
}

}  // namespace

}  // namespace qjsn

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return qjsn::Init(env, exports); }

NODE_API_MODULE(quickjs_native, InitAddon)
