// What SandboxHandle (native/sandbox_handle.h) does for each call of src/sandbox.ts.
#include "sandbox_handle.h"

#include <utility>

#include "executor.h"
#include "reaper.h"

namespace qjsn {

namespace {

const napi_type_tag kHandleTag = {0x7a1c5e0d2f4b4c11ULL, 0x9e3b6a85d0c2f417ULL};

}  // namespace

Napi::Function SandboxHandle::Define(Napi::Env env) {
  return DefineClass(
      env, "SandboxHandle",
      {
          InstanceMethod("start", &SandboxHandle::guarded<&SandboxHandle::Start, 0>),
          InstanceMethod("stop", &SandboxHandle::guarded<&SandboxHandle::Stop, 0>),
          InstanceMethod("settle", &SandboxHandle::guarded<&SandboxHandle::Settle, 1>),
          InstanceMethod("appendResult", &SandboxHandle::guarded<&SandboxHandle::AppendResult, 1>),
          InstanceMethod("answerSync", &SandboxHandle::guarded<&SandboxHandle::AnswerSync, 1>),
          InstanceMethod("defineFunction", &SandboxHandle::guarded<&SandboxHandle::DefineFunction, 1, Needs::Idle>),
          InstanceMethod("defineFrozenFunction",
                         &SandboxHandle::guarded<&SandboxHandle::DefineFrozenFunction, 1, Needs::Idle>),
          InstanceMethod("setGlobal", &SandboxHandle::guarded<&SandboxHandle::SetGlobal, 2, Needs::Idle>),
          InstanceMethod("getGlobal", &SandboxHandle::guarded<&SandboxHandle::GetGlobal, 1, Needs::Idle>),
          InstanceMethod("globalNames", &SandboxHandle::guarded<&SandboxHandle::GlobalNames, 0, Needs::Idle>),
          InstanceMethod("memoryUsage", &SandboxHandle::guarded<&SandboxHandle::MemoryUsage, 0>),
          InstanceMethod("writeSnapshot", &SandboxHandle::guarded<&SandboxHandle::WriteSnapshot, 1, Needs::Idle>),
          InstanceMethod("readSnapshot", &SandboxHandle::guarded<&SandboxHandle::ReadSnapshot, 1, Needs::Idle>),
          InstanceMethod("dispose", &SandboxHandle::Dispose),
          InstanceMethod("setClock", &SandboxHandle::guarded<&SandboxHandle::SetClock, 0, Needs::Idle>),
          InstanceMethod("setRandomSeed", &SandboxHandle::guarded<&SandboxHandle::SetRandomSeed, 0, Needs::Idle>),
      });
}

Napi::Function SandboxHandle::DefineEvalSync(Napi::Env env, EnvBridge* bridge) {
  return Napi::Function::New(env, EvalSyncOf, "evalSync", bridge);
}

SandboxHandle::SandboxHandle(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SandboxHandle>(info) {
  Napi::Env env = info.Env();
  bridge_ = env.GetInstanceData<std::shared_ptr<EnvBridge>>()->get()->shared_from_this();
  HandleArgs args(info);
  if (!args.has(2) || !args.isFunction(0) || !args.isFunction(1)) {
    throwNativeError(env, NativeError{ErrorCode::InvalidArgument, "SandboxHandle: bad arguments"});
    return;
  }
  const EnvBridge& b = *bridge_;
  EngineOptions o;
  o.memoryLimitBytes = static_cast<size_t>(slotU64(b.createOption(CreateSlot::memoryLimitBytes)));
  o.maxStackSizeBytes = static_cast<size_t>(slotU64(b.createOption(CreateSlot::maxStackSizeBytes)));
  o.captureConsole = slotFlag(b.createOption(CreateSlot::captureConsole));
  o.maxConsoleBytes = static_cast<size_t>(slotU64(b.createOption(CreateSlot::maxConsoleBytes)));
  o.copyLimitBytes = slotU64(b.createOption(CreateSlot::copyLimitBytes));
  o.maxHostCallsInFlight = slotU64(b.createOption(CreateSlot::maxHostCallsInFlight));
  // Weak: the dispatcher closes over the Sandbox that owns this handle, and a strong reference
  // would keep both alive forever. An eval in flight keeps them alive through its promise.
  dispatcher_ = Napi::Weak(info[0].As<Napi::Function>());
  primitiveDispatcher_ = Napi::Weak(info[1].As<Napi::Function>());
  id_ = bridge_->nextSandboxId();
  engine_ = std::make_shared<Engine>(id_, o, bridge_);
  if (!engine_->valid()) {
    NativeError why = engine_->creationFailure();
    engine_.reset();
    throwNativeError(env, why);
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

void SandboxHandle::release() {
  if (!engine_) return;
  bool freedOffThread = false;
  Engine::AfterDispose after = engine_->dispose();
  Executor::instance().stopRequested(engine_.get());
  switch (after) {
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

void SandboxHandle::completeEval(EvalOutcome& o) {
  if (!deferred_ || o.evalId != evalId_) return;
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  auto deferred = std::move(*deferred_);
  deferred_.reset();
  bridge_->evalEnded();
  deferred.Resolve(outcomeToJs(env, o));
}

void SandboxHandle::hostCall(uint32_t fnId, uint32_t callId, uint64_t evalId, std::vector<uint8_t>& args) {
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

void SandboxHandle::consoleLine(uint32_t level, uint64_t evalId, std::vector<uint8_t>& args) {
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

std::optional<HostResult> SandboxHandle::syncCall(uint32_t fnId, std::vector<uint8_t>& args, EnvBridge::SyncSlot* slot) {
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

Napi::Value SandboxHandle::busyError(Napi::Env env) {
  return errorToJs(env, NativeError{ErrorCode::Busy, "an eval is running in this sandbox"});
}

bool SandboxHandle::alive(const Napi::CallbackInfo& info) {
  bool tagged = false;
  napi_check_object_type_tag(info.Env(), info.This(), &kHandleTag, &tagged);
  if (!tagged || !engine_) {
    disposedError(info.Env());
    return false;
  }
  return true;
}

void SandboxHandle::disposedError(Napi::Env env) {
  throwNativeError(env, NativeError{ErrorCode::Disposed, "the sandbox is disposed"});
}

std::optional<EvalRequest> SandboxHandle::requestOf(const EnvBridge& b, const HandleArgs& args) {
  double kind = b.request(RequestSlot::kind);
  if (!(kind >= 0 && kind < static_cast<int>(JobKind::Count))) return std::nullopt;
  EvalRequest r;
  r.kind = static_cast<JobKind>(static_cast<int>(kind));
  r.executionBudgetMs = b.request(RequestSlot::budgetMs);
  r.snapshotMaxBytes = slotU64(b.request(RequestSlot::snapshotMaxBytes));
  switch (r.kind) {
    case JobKind::Eval:
    case JobKind::EvalThenSnapshot: {
      bool thenSnapshot = r.kind == JobKind::EvalThenSnapshot;
      if (!args.has(thenSnapshot ? 3 : 2) || (thenSnapshot && !args.isArray(2))) return std::nullopt;
      r.code = args.source(0);
      r.filename = args.utf8(1);
      if (thenSnapshot) r.snapshotExclude = args.utf16Set(2);
      r.describeUnserializable = slotFlag(b.request(RequestSlot::describe));
      r.streamConsole = slotFlag(b.request(RequestSlot::streamConsole));
      uint32_t depth = slotU32(b.request(RequestSlot::displayDepth));
      r.resultDisplay = {slotU32(b.request(RequestSlot::resultParts)), depth};
      r.thrownDisplay = {slotU32(b.request(RequestSlot::thrownParts)), depth};
      break;
    }
    case JobKind::WriteSnapshot:
      if (!args.has(1) || !args.isArray(0)) return std::nullopt;
      r.snapshotExclude = args.utf16Set(0);
      break;
    case JobKind::ReadSnapshot:
      if (!args.has(1)) return std::nullopt;
      r.snapshotBody = args.bytes(0);
      break;
    case JobKind::Count: return std::nullopt;
  }
  return r;
}

Napi::Value SandboxHandle::EvalSyncOf(const Napi::CallbackInfo& info) {
  EnvBridge* bridge = static_cast<EnvBridge*>(info.Data());
  SandboxHandle* handle = bridge->handleOf(slotU32(bridge->request(RequestSlot::sandboxId)));
  if (!handle) {
    disposedError(info.Env());
    return info.Env().Undefined();
  }
  std::optional<EvalRequest> request = requestOf(*bridge, HandleArgs(info));
  if (!request || request->kind != JobKind::Eval) return info.Env().Undefined();
  // Nothing else keeps the handle's wrapper alive while host functions run (they may drop it).
  handle->Ref();
  Napi::Value answer = handle->EvalSync(info.Env(), std::move(*request));
  handle->Unref();
  return answer;
}

Napi::Value SandboxHandle::EvalSync(Napi::Env env, EvalRequest request) {
  std::shared_ptr<Engine> keep = engine_;
  // A host function may call evalSync here again (refused as busy): it must leave the outer
  // eval's scope open. Each call closes only the scope its own eval opened.
  PrimitiveScope outer = std::exchange(primitiveScope_, PrimitiveScope());
  EvalOutcome o = keep->evalSync(std::move(request));
  closePrimitiveScope();
  primitiveScope_ = outer;
  return answerHere(env, o);
}

Napi::Value SandboxHandle::answerHere(Napi::Env env, const EvalOutcome& o) {
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
  auto in = [](AnsweredSlot slot) { return static_cast<uint32_t>(slot); };
  Napi::Array extras = Napi::Array::New(env, kAnsweredSlots);
  extras.Set(in(AnsweredSlot::value), spill);
  extras.Set(in(AnsweredSlot::message), Napi::String::New(env, o.message));
  extras.Set(in(AnsweredSlot::console),
             o.console.empty() ? env.Undefined()
                               : Napi::Buffer<uint8_t>::Copy(env, o.console.data(), o.console.size()).As<Napi::Value>());
  return extras;
}

Napi::Value SandboxHandle::Start(Napi::Env env, const HandleArgs& args) {
  std::optional<EvalRequest> r = requestOf(*bridge_, args);
  if (!r) return env.Undefined();
  if (engine_->broken()) return errorToJs(env, NativeError{ErrorCode::Broken, "the sandbox is broken"});
  const EnvBridge& b = *bridge_;
  // Only a plain eval runs here or is answered at once: a snapshot job's cost grows with the
  // guest's state, which is never walked on the main thread this way.
  bool plainEval = r->kind == JobKind::Eval;
  bool runInline = plainEval && slotFlag(b.request(RequestSlot::runInline));
  bool answerNow = plainEval && slotFlag(b.request(RequestSlot::answerNow));
  return startAsync(env, std::move(*r), slotU64(b.request(RequestSlot::evalId)), runInline, answerNow);
}

Napi::Value SandboxHandle::startAsync(Napi::Env env, EvalRequest request, uint64_t evalId, bool runInline, bool answerNow) {
  if (deferred_ || !engine_->beginAsync(std::move(request), evalId)) return busyError(env);
  evalId_ = evalId;
  appended_.clear();  // what earlier evals' calls gathered and never settled
  inline_ = runInline;
  if (answerNow && !runInline) {
    // No JavaScript runs until this returns, so nothing sees the eval without its promise.
    bridge_->expectOutcome(id_, evalId);
    Executor::instance().schedule(engine_);
    std::optional<EvalOutcome> outcome = bridge_->takeOutcome(*engine_);
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

void SandboxHandle::run() {
  if (inline_) {
    runInline();
    return;
  }
  Executor::instance().schedule(engine_);
  bridge_->awaitReply();
}

void SandboxHandle::runInline() {
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

Napi::Value SandboxHandle::Stop(Napi::Env env, const HandleArgs&) {
  uint32_t reason = slotU32(callSlot(CallSlot::reason));
  auto is = [reason](StopReason r) { return reason == static_cast<uint32_t>(r); };
  if (!is(StopReason::WallBudget) && !is(StopReason::Abort)) return env.Undefined();
  if (engine_->requestStop(static_cast<StopReason>(reason), slotU64(callSlot(CallSlot::evalId)))) run();
  Executor::instance().stopRequested(engine_.get());
  return env.Undefined();
}

Napi::Value SandboxHandle::AnswerSync(Napi::Env env, const HandleArgs& args) {
  if (parkedSlot_ && slotU32(callSlot(CallSlot::callId)) == parkedToken_)
    EnvBridge::finishSlot(std::exchange(parkedSlot_, nullptr), bridge_->hostResultOf(args.value(0)));
  return env.Undefined();
}

Napi::Value SandboxHandle::Settle(Napi::Env env, const HandleArgs& args) {
  HostResult r;
  r.callId = slotU32(callSlot(CallSlot::callId));
  r.ok = slotFlag(callSlot(CallSlot::ok));
  bool collect = slotFlag(callSlot(CallSlot::collect));  // read before guest or host code runs
  if (r.ok && args.value(0).IsNull()) {
    auto appended = appended_.find(r.callId);
    if (appended != appended_.end()) {
      r.value = std::move(appended->second);
      appended_.erase(appended);
    }
  } else if (r.ok) {
    r.value = bridge_->resultBytes(args.value(0));
  } else if (args.isArray(0)) {
    Napi::Array a = args.value(0).As<Napi::Array>();
    r.errorName = a.Get(0u).ToString().Utf8Value();
    r.errorMessage = a.Get(1u).ToString().Utf8Value();
  }
  bool parked = engine_->deliver(std::move(r));
  if (inline_) {
    if (parked) runInline();
    return env.Undefined();
  }
  // The guest goes on: in the slice still waiting for this result, or in the one queued now.
  if (parked) Executor::instance().schedule(engine_);
  std::shared_ptr<EnvBridge> bridge = bridge_;  // a host function may dispose this handle
  if (!collect) bridge->awaitReply();
  else if (bridge->collectNextCall()) bridge->drain();
  return env.Undefined();
}

Napi::Value SandboxHandle::AppendResult(Napi::Env env, const HandleArgs& args) {
  Napi::Value piece = args.value(0);
  if (!piece.IsTypedArray()) return env.Undefined();
  auto bytes = piece.As<Napi::Uint8Array>();
  std::vector<uint8_t>& gathered = appended_[slotU32(callSlot(CallSlot::callId))];
  if (gathered.empty()) gathered.reserve(slotU32(callSlot(CallSlot::resultBytes)));
  gathered.insert(gathered.end(), bytes.Data(), bytes.Data() + bytes.ByteLength());
  return env.Undefined();
}

Napi::Value SandboxHandle::DefineFunction(Napi::Env env, const HandleArgs& args) {
  uint32_t fnId = slotU32(callSlot(CallSlot::fnId));
  bool async = slotFlag(callSlot(CallSlot::async));
  return errorToJs(env, engine_->defineFunction(args.utf8(0), fnId, async));
}

Napi::Value SandboxHandle::DefineFrozenFunction(Napi::Env env, const HandleArgs& args) {
  bool installed = false;
  uint32_t fnId = slotU32(callSlot(CallSlot::fnId));
  std::optional<NativeError> error = engine_->defineFrozenFunction(args.utf8(0), fnId, &installed);
  if (error) return errorToJs(env, error);
  return Napi::Boolean::New(env, installed);
}

Napi::Value SandboxHandle::SetGlobal(Napi::Env env, const HandleArgs& args) {
  std::vector<uint8_t> bytes = args.bytes(1);
  return errorToJs(env, engine_->setGlobal(args.utf8(0), bytes.data(), bytes.size()));
}

Napi::Value SandboxHandle::GetGlobal(Napi::Env env, const HandleArgs& args) {
  std::vector<uint8_t> out;
  std::optional<NativeError> error = engine_->getGlobal(args.utf8(0), &out);
  if (error) return errorToJs(env, error);
  return Napi::Buffer<uint8_t>::Copy(env, out.data(), out.size());
}

Napi::Value SandboxHandle::GlobalNames(Napi::Env env, const HandleArgs&) {
  std::vector<std::string> names = engine_->globalNames(slotU32(callSlot(CallSlot::limit)));
  Napi::Array a = Napi::Array::New(env, names.size());
  for (size_t i = 0; i < names.size(); i++) a.Set(static_cast<uint32_t>(i), Napi::String::New(env, names[i]));
  return a;
}

Napi::Value SandboxHandle::WriteSnapshot(Napi::Env env, const HandleArgs& args) {
  std::optional<EvalRequest> r = requestOf(*bridge_, args);
  if (!r || r->kind != JobKind::WriteSnapshot) return env.Undefined();
  std::vector<uint8_t> body;
  SnapshotResult result = engine_->writeSnapshot(r->snapshotExclude, r->snapshotMaxBytes, &body);
  Napi::Value payload = env.Undefined();
  if (result.status == SnapshotStatus::Ok) payload = Napi::Buffer<uint8_t>::Copy(env, body.data(), body.size());
  return snapshotResultToJs(env, result, payload);
}

Napi::Value SandboxHandle::ReadSnapshot(Napi::Env env, const HandleArgs& args) {
  std::optional<EvalRequest> r = requestOf(*bridge_, args);
  if (!r || r->kind != JobKind::ReadSnapshot) return env.Undefined();
  SnapshotResult result = engine_->readSnapshot(r->snapshotBody.data(), r->snapshotBody.size(), r->executionBudgetMs);
  return snapshotResultToJs(env, result, env.Undefined());
}

Napi::Value SandboxHandle::MemoryUsage(Napi::Env env, const HandleArgs&) {
  Napi::Array a = Napi::Array::New(env, 3);
  a.Set(0u, Napi::Number::New(env, static_cast<double>(engine_->memoryUsed())));
  a.Set(1u, Napi::Number::New(env, static_cast<double>(engine_->memoryPeak())));
  a.Set(2u, Napi::Number::New(env, static_cast<double>(engine_->memoryLimit())));
  return a;
}

Napi::Value SandboxHandle::SetClock(Napi::Env env, const HandleArgs&) {
  bool fixed = slotFlag(callSlot(CallSlot::clockFixed));
  if (engine_->setClock(fixed, callSlot(CallSlot::epochMs), slotFlag(callSlot(CallSlot::localTimeUtc))))
    return env.Undefined();
  return errorToJs(env, NativeError{ErrorCode::InvalidArgument, "the clock's time is outside the Date range"});
}

Napi::Value SandboxHandle::SetRandomSeed(Napi::Env env, const HandleArgs&) {
  double seed = callSlot(CallSlot::seed);
  if (seed >= 0 && seed < 9007199254740992.0 && engine_->setRandomSeed(static_cast<uint64_t>(seed)))
    return env.Undefined();
  return errorToJs(env, NativeError{ErrorCode::InvalidArgument, "the seed is not an integer below 2**53"});
}

Napi::Value SandboxHandle::Dispose(const Napi::CallbackInfo& info) {
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

}  // namespace qjsn
