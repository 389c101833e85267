// One sandbox: a QuickJS runtime + context with its own limits, interrupt deadline, job queue,
// console buffer and pending host calls. An Engine is entered by one thread at a time: the
// Node main thread for synchronous work, an executor thread for async evals.
#pragma once

#include <atomic>
#include <ctime>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "intrinsics.h"
#include "platform.h"
#include "snapshot.h"
#include "wire.h"

namespace qjsn {

enum class EvalStatus : int {
  Ok = 0,
  GuestError = 1,
  SyntaxError = 2,
  Timeout = 3,
  OutOfMemory = 4,
  StackOverflow = 5,
  Aborted = 6,
  Disposed = 7,
  Unserializable = 8,
  Broken = 9,
  Busy = 10,
};

// Why guest code is being stopped. Written by any thread, read by the interrupt handler.
enum class StopReason : int { None = 0, ExecutionBudget, WallBudget, Abort, Dispose };

struct EngineOptions {
  size_t memoryLimitBytes = 64u << 20;
  size_t maxStackSizeBytes = 1u << 20;
  bool captureConsole = true;
  size_t maxConsoleBytes = 1u << 20;
};

struct EvalRequest {
  std::string code;
  std::string filename = "<eval>";
  double executionBudgetMs = 5000;
  bool describeUnserializable = false;
  bool streamConsole = false;  // also hand each console line to the host as it is written (async evals)
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
};

struct HostResult {
  uint32_t callId = 0;
  bool ok = true;
  std::vector<uint8_t> value;  // wire bytes of the result when ok
  std::string errorName;       // when not ok
  std::string errorMessage;
};

// The main-thread side, implemented by the addon.
class HostBridge {
 public:
  virtual ~HostBridge() = default;
  // Runs a synchronous host function; blocks the calling executor thread until it returns.
  virtual HostResult callSync(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t> args) = 0;
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
  JSContext* context() const { return ctx_; }
  uint32_t id() const { return id_; }

  // --- main thread, while no async eval is active -------------------------------------------
  EvalOutcome evalSync(const EvalRequest& request);
  // Defines a host function at a dotted path ("tools.search"). Returns an error text or "".
  std::string defineFunction(const std::string& path, uint32_t fnId, bool async);
  std::string setGlobal(const std::string& name, const uint8_t* data, size_t size);
  // Fills `out` with wire bytes of the global's own data property; returns an error text or "".
  std::string getGlobal(const std::string& name, std::vector<uint8_t>* out, EvalStatus* status);

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

  // --- async evals (state transitions are guarded by mu_) -----------------------------------
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
  // the engine never runs guest code again.
  bool abandon(int64_t nowNs, int64_t graceNs);

  // Frees the runtime now if nothing runs it; otherwise the executor frees it when the eval
  // stops. True when the engine must be scheduled so that happens.
  bool dispose();
  bool busy() const { return state_ != State::Idle || inHostCall_; }
  bool broken() const { return broken_; }
  size_t memoryUsed() const { return memory_.used.load(std::memory_order_relaxed); }
  size_t memoryPeak() const { return memory_.peak.load(std::memory_order_relaxed); }
  size_t memoryLimit() const { return options_.memoryLimitBytes; }

  // For the interrupt handler and trampolines.
  int onInterrupt();
  JSValue callHost(int fnId, bool async, int argc, JSValueConst* argv);
  JSValue writeConsole(int level, int argc, JSValueConst* argv);

  enum class State { Idle, Queued, Running, Parked };

 private:
  void enterGuest(double budgetMs);
  void pauseClock();
  void resumeClock();
  void leaveGuest();
  void teardown();
  bool compileAndStart(const EvalRequest& request, bool asyncMode, EvalOutcome* out);
  void drainJobs();
  bool settled(EvalOutcome* out);
  void finish(EvalOutcome* out);
  void classifyException(JSValue exception, EvalOutcome* out);
  void encodeValueInto(JSValueConst v, bool describe, EvalOutcome* out);
  void clearEvalState();
  void resetEvalCounters(uint64_t evalId);
  void installGlobals();

  uint32_t id_;
  EngineOptions options_;
  std::shared_ptr<HostBridge> bridge_;
  MemoryCounter memory_;
  JSRuntime* rt_ = nullptr;
  JSContext* ctx_ = nullptr;
  Intrinsics intrinsics_;
  WireLimits limits_;

  // Interrupt and budget state.
  std::atomic<int> stop_{0};
  std::atomic<int64_t> sliceDeadlineNs_{0};  // 0 when no guest code runs
  int64_t sliceStartNs_ = 0;
  double budgetMs_ = 0;
  double executionMs_ = 0;

  // The active eval.
  std::mutex mu_;
  State state_ = State::Idle;
  bool broken_ = false;
  bool disposeRequested_ = false;
  bool inHostCall_ = false;
  bool syncMode_ = false;
  bool started_ = false;
  bool abandoned_ = false;
  bool asyncScript_ = false;
  OwnedValue completion_;  // a plain script's completion value (async scripts use evalPromise_)
  uint32_t raisedOomAtStart_ = 0, raisedOverflowAtStart_ = 0;
  int64_t stopRequestedNs_ = 0;
  // Watchdog bookkeeping (guarded by mu_): the CPU clock of the thread running the current slice,
  // and that clock's reading when the watchdog first found the slice overdue (-1: not overdue).
  platform::ThreadCpuClock sliceThreadClock_{};
  int64_t overdueCpuNs_ = -1;
  uint64_t evalId_ = 0;         // the eval whose state is in the runtime
  uint64_t pendingEvalId_ = 0;  // the async eval accepted by beginAsync
  EvalRequest request_;
  OwnedValue evalPromise_;
  std::vector<HostResult> inbox_;
  struct PendingCall {
    OwnedValue resolve, reject;
  };
  std::unordered_map<uint32_t, PendingCall> pending_;
  uint32_t nextCallId_ = 1;
  uint32_t hostCalls_ = 0;
  WireWriter console_;
  bool consoleTruncated_ = false;
};

int64_t monotonicNs();

}  // namespace qjsn
