// One sandbox: a QuickJS runtime + context with its own limits, interrupt deadline, job queue,
// console buffer and pending host calls. An Engine is entered by one thread at a time: the
// Node main thread for synchronous work, an executor thread for async evals.
// Its members are defined by concept: engine.cc (runtime, context, teardown), guest_budgets.cc
// (execution time and stack), evaluation.cc (code to outcome, evalSync), async_eval.cc (async
// evals, under eval_lifecycle.h), host_calls.cc, console.cc, globals.cc, clock.cc, snapshot.cc.
// Its parts with state of their own are classes: the eval lifecycle (eval_lifecycle.h), the
// execution clock (budget_clock.h) and the host-call table (host_call_table.h).
#pragma once

#include <atomic>
#include <ctime>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "budget_clock.h"
#include "eval_lifecycle.h"
#include "guest_codec.h"
#include "host_call_table.h"
#include "intrinsics.h"
#include "snapshot.h"
#include "threads.h"
#include "wire.h"

namespace qjsn {

// EvalStatus and StopReason: native/boundary.h.

struct EngineOptions {
  size_t memoryLimitBytes = 64u << 20;
  size_t maxStackSizeBytes = 1u << 20;
  bool captureConsole = true;
  size_t maxConsoleBytes = 1u << 20;
  // Bytes one eval may hand to the host in all: result, console, thrown value, host-call arguments.
  uint64_t copyLimitBytes = 64u << 20;
  // Async host calls one eval may have in flight (the default, maxHostCallsInFlight, is src/options.ts's).
  uint64_t maxHostCallsInFlight = UINT64_MAX;
  // Sync host calls of inline evals with primitive arguments take HostBridge::callSyncPrimitive
  // (the Node main thread's fast path); a helper process's bridge has none and turns it off.
  bool primitiveHostCalls = true;
};

struct EvalRequest {
  // What the job does. Eval kinds run `code`; a snapshot write runs no guest code but its cost
  // grows with the guest's state, and a read re-creates functions and classes from source (guest
  // code): both run on the executor, under the job's budgets, like an eval. EvalThenSnapshot
  // writes the snapshot in the same job once the eval ended without being stopped: one executor
  // round trip for a caller that keeps the state after every eval.
  JobKind kind = JobKind::Eval;
  std::string code;
  std::string filename = "<eval>";
  double executionBudgetMs = 5000;
  bool describeUnserializable = false;
  // Copies for display of the result and of a thrown value (GuestEncoder; zero parts: exact).
  DisplayCut resultDisplay;
  DisplayCut thrownDisplay;
  bool streamConsole = false;         // also hand each console line to the host as it is written (async evals)
  std::vector<uint8_t> snapshotBody;  // ReadSnapshot: the body
  std::unordered_set<std::u16string> snapshotExclude;  // both writes: names the host owns
  uint64_t snapshotMaxBytes = 0;
};

struct EvalOutcome {
  EvalStatus status = EvalStatus::Ok;
  std::vector<uint8_t> value;  // wire bytes: the result (Ok) or what was thrown (GuestError, SyntaxError)
  std::string message;         // for statuses that are not guest throws
  StopReason stop = StopReason::None;
  std::vector<uint8_t> console;  // repeated (u8 level, u32 size, wire bytes of the argument array)
  bool consoleTruncated = false;
  double executionMs = 0;
  uint32_t hostCalls = 0;
  size_t memoryUsedBytes = 0;
  size_t peakMemoryBytes = 0;
  uint64_t evalId = 0;
  JobKind kind = JobKind::Eval;            // the request's
  std::optional<SnapshotResult> snapshot;  // a snapshot job's read or write, when it ran
  std::vector<uint8_t> snapshotBody;       // what a snapshot write wrote
};

struct HostResult {
  uint32_t callId = 0;
  bool ok = true;
  std::vector<uint8_t> value;  // wire bytes of the result when ok
  std::string errorName;       // when not ok
  std::string errorMessage;
};

// A primitive that crosses a synchronous host call as it is, without the codec: the fast path of
// inline evals, where a host call is a plain function call on the same thread. Trivial (no
// initializers): the fast path builds these per call and must not pay for zeroing them.
struct Primitive {
  enum class Kind : uint8_t { Undefined, Null, Boolean, Number, Utf8, Utf16 };
  Kind kind;
  double number;      // Number; Boolean as 0 or 1
  const void* chars;  // Utf8: bytes holding no lone surrogate; Utf16: code units (lone surrogates kept)
  size_t length;      // of `chars`, in bytes or code units
};
// Calls with more arguments, or longer strings (in UTF-16 code units), take the codec.
constexpr int kMaxPrimitiveArgs = boundary::maxPrimitiveArgs;
constexpr size_t kMaxPrimitiveChars = boundary::maxPrimitiveChars;

// One sync host call on the fast path: the guest's primitive arguments and the host's answer, in
// one block that is passed down by a single pointer. Built per call, so nothing but `fallback`
// (one flag) is initialized.
struct PrimitiveCall {
  uint32_t fnId;
  int argc;
  Primitive args[kMaxPrimitiveArgs];
  Primitive result;                       // the answer, when the host answered with a primitive
  char16_t text[kMaxPrimitiveChars + 1];  // a string answer's units (`result.chars`)
  std::optional<HostResult> fallback;     // else the answer as callSync's (wire bytes or an error)
};

// The main-thread side, implemented by the addon.
class HostBridge {
 public:
  virtual ~HostBridge() = default;
  // Runs a synchronous host function; blocks the calling executor thread until it returns.
  virtual HostResult callSync(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t> args) = 0;
  // callSync's fast path, on the main thread only. True when the host answered with a primitive
  // (`call->result`; a string as Utf16 in `call->text`); false when `call->fallback` holds the
  // answer as callSync's would (wire bytes or an error).
  virtual bool callSyncPrimitive(uint32_t sandboxId, PrimitiveCall* call) = 0;
  virtual void postAsyncCall(uint32_t sandboxId, uint64_t evalId, uint32_t callId, uint32_t fnId,
                             std::vector<uint8_t> args) = 0;
  virtual void postEvalDone(uint32_t sandboxId, EvalOutcome outcome) = 0;
  // One console line (wire bytes of its argument array) of a running eval, for live progress.
  virtual void postConsole(uint32_t sandboxId, uint64_t evalId, int level, std::vector<uint8_t> args) = 0;
  virtual bool onMainThread() const = 0;
};

struct MemoryCounter {
  std::atomic<size_t> used{0};
  std::atomic<size_t> peak{0};
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  Engine(uint32_t id, const EngineOptions& options, std::shared_ptr<HostBridge> bridge);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  bool valid() const { return ctx_ != nullptr; }
  // Why the constructor left the engine invalid: memory, the calling thread's stack, or the realm.
  NativeError creationFailure() const { return creationFailure_; }
  JSContext* context() const { return ctx_; }
  uint32_t id() const { return id_; }

  // --- main thread, while no async eval is active -------------------------------------------
  EvalOutcome evalSync(EvalRequest request);
  // Defines a host function at a dotted path ("tools.search"). Nothing on success.
  std::optional<NativeError> defineFunction(const std::string& path, uint32_t fnId, bool async);
  // Installs the async host function `fnId` as a frozen, read-only, non-configurable global `name`
  // through the C API (native/frozen_global.cc). `installed` is false when the guest holds a
  // global `name` it cannot lose.
  std::optional<NativeError> defineFrozenFunction(const std::string& name, uint32_t fnId, bool* installed);
  std::optional<NativeError> setGlobal(const std::string& name, const uint8_t* data, size_t size);
  // Fills `out` with wire bytes of the global's own data property; else why it could not.
  std::optional<NativeError> getGlobal(const std::string& name, std::vector<uint8_t>* out);
  // Up to `limit` names of the global object's own string-keyed properties, read natively: no
  // getter, Proxy trap or guest-replaceable built-in runs.
  std::vector<std::string> globalNames(size_t limit);

  // --- deterministic time and randomness (native/clock.cc, deps patch 0030); main thread ------
  // Each returns false when an eval is active or the engine is gone, changing nothing.
  // Date.now()/new Date() return `epochMs` while `fixed`; local-time methods use UTC if asked.
  bool setClock(bool fixed, double epochMs, bool localTimeUtc);
  bool setRandomSeed(uint64_t seed);
  // The Math.random generator state, so snapshots can carry it.
  bool randomState(uint64_t* state);
  bool setRandomState(uint64_t state);

  // --- snapshots (native/snapshot.cc); main thread, while no eval is active -----------------
  // Writes every user-defined global except `exclude` (names the host owns) as a snapshot body.
  SnapshotResult writeSnapshot(const std::unordered_set<std::u16string>& exclude, uint64_t maxBytes,
                               std::vector<uint8_t>* out);
  // Defines the globals of a snapshot body; re-created source runs under `budgetMs` of execution.
  SnapshotResult readSnapshot(const uint8_t* data, size_t size, double budgetMs);

  // --- async evals (lifecycle transitions, native/eval_lifecycle.h, are guarded by mu_) ------
  // Starts an eval to be run by the executor. False when another eval is active.
  bool beginAsync(EvalRequest request, uint64_t evalId);
  // Queues a host result; true when the engine must be scheduled to deliver it.
  bool deliver(HostResult result);
  // Asks running or parked guest code to stop; true when the engine must be scheduled.
  // Requests for an eval that already ended are ignored.
  bool requestStop(StopReason reason, uint64_t evalId);
  // Runs one slice on an executor thread: start or resume the eval, drain jobs, maybe finish.
  // True when the engine must be scheduled again (results or a stop arrived meanwhile).
  bool runSlice();
  // Called by the watchdog when a slice cannot be interrupted: the eval is answered now and
  // the engine never runs guest code again. `graceNs` is CPU time burned past the deadline.
  bool abandon(int64_t graceNs);

  // What the caller of dispose() does next.
  enum class AfterDispose {
    Nothing,   // freed already, or the eval that runs now frees it when it stops
    Schedule,  // schedule the engine: the slice that answers its parked eval frees it
    Release,   // nothing runs it: the runtime is freed with the last reference (~Engine)
  };
  // Stops the engine for good. A runtime that nothing runs is left for the caller to free where
  // it chooses (native/reaper.h); otherwise the executor frees it when the eval stops.
  AfterDispose dispose();
  bool busy() const { return lifecycle_.busy(); }
  // An accepted async eval is still waiting for a thread's first slice.
  bool awaitingSlice() const { return lifecycle_.phase() == EvalLifecycle::Phase::Starting; }
  bool broken() const { return lifecycle_.broken(); }
  size_t memoryUsed() const { return memory_.used.load(std::memory_order_relaxed); }
  size_t memoryPeak() const { return memory_.peak.load(std::memory_order_relaxed); }
  size_t memoryLimit() const { return options_.memoryLimitBytes; }

  // For the interrupt handler and trampolines.
  static Engine* of(JSContext* ctx) { return static_cast<Engine*>(JS_GetContextOpaque(ctx)); }
  int onInterrupt();
  JSValue callHost(int fnId, bool async, int argc, JSValueConst* argv);
  bool callHostPrimitive(uint32_t fnId, int argc, JSValueConst* argv, JSValue* out);
  JSValue syncResultToGuest(const HostResult& r);
  JSValue writeConsole(int level, int argc, JSValueConst* argv);
  // Ends the eval with `reason` (CopyLimit, HostCallLimit): an uncatchable error, like an interrupt.
  JSValue stopGuest(StopReason reason);

 private:
  // Starts the execution clock and sets the guest's stack budget for this thread. False when the
  // thread has too little stack left to run guest code safely (stackRefusal() says why).
  bool enterGuest(double budgetMs);
  static std::string stackRefusal();
  // Sets the runtime's stack top to here and its budget to what this thread can spare (host-side
  // entries: defining globals, snapshots). False when too little is left.
  bool clampStack();
  void leaveGuest();
  void teardown();
  // The first slice of an async job: what its kind does. True when the job is done; `entered`
  // false when it ended before entering the guest (stopped before it started).
  bool startJob(EvalOutcome* out, bool* entered);
  // Each kind's first slice. startEval: true while the eval goes on (the guest still entered).
  bool startEval(EvalOutcome* out);
  bool writeSnapshotJob(EvalOutcome* out);
  bool readSnapshotJob(EvalOutcome* out);
  // A later slice of an eval: the host results that arrived, then the jobs they queued.
  void resumeEval(std::vector<HostResult>* results);
  bool compileAndStart(const EvalRequest& request, EvalOutcome* out);
  void drainJobs();
  bool settled(EvalOutcome* out);
  void neverSettles(const char* awaitMessage, EvalOutcome* out);
  void finish(EvalOutcome* out);
  void classifyException(JSValue exception, EvalOutcome* out);
  void encodeValueInto(JSValueConst v, bool describe, EvalOutcome* out);
  // Reads a snapshot body into the context; the caller entered the guest (clock and stack set).
  SnapshotResult readSnapshotEntered(const uint8_t* data, size_t size);
  // Wire limits for a value the host will receive during this eval: the structural caps, with the
  // byte cap lowered to what is left of the eval's copy budget.
  WireLimits copyLimits() const;
  uint64_t copyBudgetLeft() const;
  // True when `e` failed on the byte cap because the copy budget, not the structural cap, ran out.
  bool overCopyBudget(const CodecError& e) const;
  void chargeCopy(size_t bytes) { copiedBytes_ += bytes; }
  void clearEvalState();
  void resetEvalCounters(uint64_t evalId);
  void installConsole();
  // What a host function defined by defineFunction runs: `magic` is its id, data[0] says async.
  static JSValue hostTrampoline(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int magic, JSValueConst* data);
  JSValue newHostError(const HostResult& r);
  void settleHostCalls(std::vector<HostResult>* results);
  // An outcome for the host when the lifecycle refused a transition its own code guarantees.
  static void lifecycleFault(EvalOutcome* out);
  // The snapshot write of a request with snapshotAfter, once its eval has finished.
  void snapshotAfterEval(EvalOutcome* out);

  // Why the runtime or realm could not be created (see creationFailure()).
  NativeError realmFailure(JSContext* ctx);

  uint32_t id_;
  EngineOptions options_;
  NativeError creationFailure_{ErrorCode::OutOfMemory, "could not allocate the sandbox runtime"};
  std::shared_ptr<HostBridge> bridge_;
  MemoryCounter memory_;
  JSRuntime* rt_ = nullptr;
  JSContext* ctx_ = nullptr;
  Intrinsics intrinsics_;
  WireLimits limits_;

  // The stop a running guest is asked to honour (a StopReason; 0: none), read by every interrupt
  // poll and set by any thread, and the execution clock (native/budget_clock.h).
  std::atomic<int> stop_{0};
  BudgetClock clock_;

  // The active eval.
  std::mutex mu_;
  EvalLifecycle lifecycle_;  // changed only under mu_, through lifecycle_.apply()
  // The script uses top-level await and its promise has not fulfilled yet: how the eval settles,
  // not who may run it, so it is no part of the lifecycle.
  bool asyncScript_ = false;
  OwnedValue completion_;  // the completion value (an async script's once evalPromise_ fulfils)
  uint32_t raisedOomAtStart_ = 0, raisedOverflowAtStart_ = 0;
  int64_t stopRequestedNs_ = 0;
  // Watchdog bookkeeping (guarded by mu_): the CPU clock of the thread running the current slice,
  // and that clock's reading when the watchdog first found the slice overdue (-1: not overdue).
  CpuClock sliceCpuClock_;
  int64_t overdueCpuNs_ = -1;
  uint64_t evalId_ = 0;         // the eval whose state is in the runtime
  uint64_t pendingEvalId_ = 0;  // the async eval accepted by beginAsync
  // Under mu_: the eval has ended and its snapshotAfter write runs. A stop for the eval (its wall
  // budget, an abort) is too late, and the watchdog leaves the write alone: it runs no guest code.
  bool writingAfterEval_ = false;
  EvalRequest request_;
  OwnedValue evalPromise_;
  std::vector<HostResult> inbox_;
  std::atomic<bool> inboxReady_{false};  // !inbox_.empty(), readable without mu_ by a slice waiting for a result
  int spinSkips_ = 0;                    // waits for a host result that sleep without spinning first
  HostCallTable hostCalls_{options_.maxHostCallsInFlight};  // the eval's host calls (native/host_call_table.h)
  uint64_t copiedBytes_ = 0;                                // bytes handed to the host by the current eval
  WireWriter console_;
  bool consoleTruncated_ = false;
};

}  // namespace qjsn
