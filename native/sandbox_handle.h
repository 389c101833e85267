// The JS-visible handle of one sandbox (the SandboxHandle class of the addon's exports): the
// calls of src/sandbox.ts into its Engine, and the delivery of what the engine posted (host calls,
// console lines, outcomes) back to JavaScript through the Sandbox's dispatchers.
//
// The handle is internal: src/sandbox.ts keeps it in a private field and validates every argument
// before calling in, so the guards here are cheap one-liners that only keep the process alive.
#pragma once

#include <napi.h>

#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "env_bridge.h"
#include "handle_args.h"
#include "primitive_call.h"

namespace qjsn {

class SandboxHandle : public Napi::ObjectWrap<SandboxHandle> {
 public:
  static Napi::Function Define(Napi::Env env);
  // The module's evalSync (EvalSyncOf), finding handles in `bridge`.
  static Napi::Function DefineEvalSync(Napi::Env env, EnvBridge* bridge);

  // new SandboxHandle(dispatcher, primitiveDispatcher), with the options in the create slots
  // (QJSN_CREATE_SLOTS).
  SandboxHandle(const Napi::CallbackInfo& info);

  ~SandboxHandle() override { release(); }

  void release();

  void completeEval(EvalOutcome& o);

  void hostCall(uint32_t fnId, uint32_t callId, uint64_t evalId, std::vector<uint8_t>& args);

  // A console line of the running eval, for live progress: dispatcher(2, level, 0, ...).
  void consoleLine(uint32_t level, uint64_t evalId, std::vector<uint8_t>& args);

  // A sync host call: dispatcher(0, fnId, token, ...). With a slot (the guest waits on an executor
  // thread) the token is not 0, and the dispatcher may answer undefined, then later through
  // answerSync (src/sandbox.ts decodes large arguments a slice at a time): the slot
  // is parked here until then, or until the handle is released. Nothing, when parked.
  std::optional<HostResult> syncCall(uint32_t fnId, std::vector<uint8_t>& args, EnvBridge::SyncSlot* slot);

  // The fast path of a sync host call on the main thread (native/primitive_call.h): the call word
  // (fnId * 32 + number bits * 4 + argc) and number arguments cross in the primitive slots
  // (QJSN_PRIMITIVE_SLOTS), the other arguments as they are; primitiveDispatcher answers with a
  // primitive, [bytes] (the codec's answer, as dispatcher's) or [name, message].
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

  // What a direct call answers while an eval is active: BUSY, the one code of it everywhere.
  static Napi::Value busyError(Napi::Env env);

  bool alive(const Napi::CallbackInfo& info);
  static void disposedError(Napi::Env env);

  // What a method needs before its body runs.
  enum class Needs {
    Live,  // a live engine behind a receiver of this class (type-tagged), and its arguments
    Idle,  // ... and no active eval: a direct call answers BUSY during one
  };
  // Every method's prologue, written once (as better-sqlite3's REQUIRE_DATABASE_OPEN): a disposed
  // or forged receiver throws DISPOSED, fewer than `Argc` arguments answer undefined, and an
  // `Idle` method answers BUSY while an eval is active. The method's table entry names its guard.
  template <Napi::Value (SandboxHandle::*Method)(Napi::Env, const HandleArgs&), size_t Argc, Needs needs = Needs::Live>
  Napi::Value guarded(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    HandleArgs args(info);
    if (!alive(info) || !args.has(Argc)) return env.Undefined();
    if (needs == Needs::Idle && engine_->busy()) return busyError(env);
    return (this->*Method)(env, args);
  }

  static int kind(DispatchKind k) { return static_cast<int>(k); }

  // A number of the call this method serves, from the call slots (QJSN_CALL_SLOTS) src/request.ts
  // wrote just before it: read before the method runs any JavaScript, which may write them again.
  double callSlot(CallSlot s) const { return bridge_->callSlot(s); }

  // The job a call asks for: its numbers from the request slots (QJSN_REQUEST_SLOTS), its payloads
  // from the arguments, by kind: Eval (code, filename), EvalThenSnapshot (code, filename,
  // excludedNames), WriteSnapshot (excludedNames), ReadSnapshot (body). Nothing when they do not
  // match. evalSync, start, writeSnapshot and readSnapshot all read their request here.
  static std::optional<EvalRequest> requestOf(const EnvBridge& bridge, const HandleArgs& args);

  // evalSync(code, filename) -> answerHere, for the request of kind Eval in the request slots.
  // A function of the module, not a method: the sandbox id finds the handle in one lookup, where
  // a method pays for unwrapping its receiver and checking its type tag, a tenth of a trivial eval.
  static Napi::Value EvalSyncOf(const Napi::CallbackInfo& info);

  Napi::Value EvalSync(Napi::Env env, EvalRequest request);

  // An eval's outcome for a caller that reads it at once, without building an array: the numbers
  // go into the environment's shared stats array and a value that fits into the exchange buffer;
  // only console output, a message or an oversized value come back as JS values, as
  // the answered slots (QJSN_ANSWERED_SLOTS; src/outcomes.ts syncOutcome reads them).
  Napi::Value answerHere(Napi::Env env, const EvalOutcome& o);

  // start(...payloads of the request's kind) -> Promise<outcome array>; null when busy. Runs the
  // job on an executor thread, or (a plain eval with runInline) on this one. A plain eval with
  // answerNow that ended within the main thread's short wait for it (EnvBridge::takeOutcome) is
  // answered as evalSync answers it (answerHere). Snapshot jobs put their result in the
  // outcome's snapshot slot; a restore runs guest code, which never runs on the Node main thread
  // this way.
  Napi::Value Start(Napi::Env env, const HandleArgs& args);

  Napi::Value startAsync(Napi::Env env, EvalRequest request, uint64_t evalId, bool runInline = false,
                         bool answerNow = false);

  // Runs the engine's next slice: on an executor thread, or here for an inline eval.
  void run();

  // An inline eval's slices run on the main thread, each followed by the dispatch of what it
  // posted (host calls, console lines, its outcome): a host function that answers at once resumes
  // the guest within the same loop, with no thread hand-over. The event loop waits meanwhile.
  void runInline();

  // stop(), call slots reason and evalId: a wall budget or an abort for the async eval evalId.
  Napi::Value Stop(Napi::Env env, const HandleArgs& args);

  // answerSync(bytes in the exchange buffer | Buffer | [name, message]), call slot callId (the
  // token): see syncCall.
  Napi::Value AnswerSync(Napi::Env env, const HandleArgs& args);

  // settle(bytes | null | [name, message]), call slots callId, ok and collect: with `collect`, the
  // guest's next host call is taken and dispatched here when it comes at once (src/host-calls.ts says
  // when it may). null: the bytes appendResult gathered for the call.
  Napi::Value Settle(Napi::Env env, const HandleArgs& args);

  // appendResult(piece), call slots callId and resultBytes: a piece of an async call's result, copied
  // now; a result of megabytes is handed over a piece per turn of the event loop, not copied in one go
  // by settle.
  Napi::Value AppendResult(Napi::Env env, const HandleArgs& args);

  // defineFunction(path), call slots fnId and async -> undefined | { code, message }
  Napi::Value DefineFunction(Napi::Env env, const HandleArgs& args);

  // defineFrozenFunction(name), call slot fnId -> true (installed) | false (the guest keeps its own) | { code, message }
  Napi::Value DefineFrozenFunction(Napi::Env env, const HandleArgs& args);

  // setGlobal(name, bytes) -> undefined | { code, message }
  Napi::Value SetGlobal(Napi::Env env, const HandleArgs& args);

  // getGlobal(name) -> bytes (wire format) | { code, message }
  Napi::Value GetGlobal(Napi::Env env, const HandleArgs& args);

  // globalNames(), call slot limit -> string[] | { code: "BUSY", message }
  Napi::Value GlobalNames(Napi::Env env, const HandleArgs& args);

  // writeSnapshot(excludedNames), request WriteSnapshot -> [status, body | message, [name, type, ...]] | { code: "BUSY", message }
  Napi::Value WriteSnapshot(Napi::Env env, const HandleArgs& args);

  // readSnapshot(body), request ReadSnapshot -> [status, undefined | message, [name, type, ...]] | { code: "BUSY", message }
  Napi::Value ReadSnapshot(Napi::Env env, const HandleArgs& args);

  Napi::Value MemoryUsage(Napi::Env env, const HandleArgs& args);

  // setClock(), call slots clockFixed, epochMs and localTimeUtc -> undefined | { code, message } (native/clock.cc)
  Napi::Value SetClock(Napi::Env env, const HandleArgs& args);

  // setRandomSeed(), call slot seed (an integer below 2**53) -> undefined | { code, message }
  Napi::Value SetRandomSeed(Napi::Env env, const HandleArgs& args);

  Napi::Value Dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<EnvBridge> bridge_;
  std::shared_ptr<Engine> engine_;
  Napi::FunctionReference dispatcher_;
  Napi::FunctionReference primitiveDispatcher_;
  uint32_t id_ = 0;
  uint64_t evalId_ = 0;
  std::optional<Napi::Promise::Deferred> deferred_;
  // Results of the current eval's async calls gathered by appendResult until settled, by call id.
  std::unordered_map<uint32_t, std::vector<uint8_t>> appended_;
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

}  // namespace qjsn
