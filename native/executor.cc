#include "executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "guest_turns.h"
#include "threads.h"

namespace qjsn {

struct Executor::State {
  std::mutex mu;
  std::condition_variable wake;
  GuestTurns turns;  // queued engines, parked threads, turns held
  // Slices a worker is inside right now, parked ones too. A slice loses its turn when it parks, or
  // when the watchdog gives up on it (which passes the turn on for the stuck thread).
  struct Slice {
    std::shared_ptr<Engine> engine;
    bool holdsTurn;
  };
  std::vector<Slice> running;
  std::atomic<bool> pending{false};    // mirrors turns.canTake() for spinning workers
  std::atomic<int> runningSlices{0};   // mirrors turns.held() for beginSpin
  std::atomic<bool> contended{false};  // mirrors turns.contended() for guests' interrupt polls
  std::atomic<int> spinners{0};
  std::atomic<int> idleSpinners{0};  // workers spinning for work (not in a slice)
  int64_t lastScheduledNs = 0;       // when work was last queued (steady clock)
  int cores = 1;
  int threads = 0;  // workers (a thread stuck in a built-in is not counted)
  int idle = 0;     // workers looking for work, spinning or asleep
  int maxThreads = 0;
  int warmThreads = 0;  // kept even when idle: one per core
  bool started = false;
  bool systemRead = false;           // maxThreads, cores, warmThreads (readSystem)
  std::condition_variable growWake;  // wakes the watchdog thread, which also starts workers
  bool growWanted = false;
};

namespace {

// A worker that just finished a slice takes queued work within microseconds, but is not idle yet
// when its eval's answer reaches the event loop: a new thread starts only for work still waiting
// after this long, else a tight loop of evals would start a thread per eval.
constexpr auto kGrowDelay = std::chrono::microseconds(500);
constexpr auto kWatchdogPeriod = std::chrono::milliseconds(25);

int maxThreadsFromEnv() {
  if (const char* env = std::getenv("QJSN_EXECUTOR_THREADS")) {
    int n = std::atoi(env);
    if (n > 0 && n <= 1024) return n;
  }
  return Executor::kDefaultMaxThreads;
}

void* workerMain(void* arg);

int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Whether an idle worker spins for work before it sleeps. A spin that finds no work within kSpinNs
// means the host is slow to hand over right now; after kSpinMissesBeforeSkips such misses in a
// row the worker sleeps at once for kSpinSkipsAfterMiss idle spells, so a host that works between
// jobs (an agent's tool call) does not lose a core to it. Two ways out of that run:
//  - work that comes within kSpinNs of a spell that skipped its spin would have been found by it
//    (the misses were a passing delay: a GC pause, another process on the core). Waiting out the
//    run would keep the hand-overs slow, and slow hand-overs keep spins missing, so the next spell
//    spins at once, as a probe;
//  - a probe that misses although the work came quickly while sleeping suggests that spinning
//    itself keeps the host from running (no core is free: other processes use them). The next run
//    then cannot end early, and ends in another probe: on a loaded machine one wasted spin per
//    kSpinSkipsAfterMiss + 1 jobs, fewer than the two per run the misses alone would cost. Any
//    spin that finds work ends the probing.
class IdleSpinPolicy {
 public:
  // Whether this idle spell spins; `now()` reads the clock for a spell that skips.
  template <typename Now>
  bool spinNow(Now now) {
    skippedAt_ = -1;
    if (skips_ == 0) return true;
    skips_--;
    skippedAt_ = now();
    return false;
  }
  void spun(bool found) {
    if (found) {
      misses_ = 0;
      probing_ = false;
    } else if (probing_) {
      skips_ = kSpinSkipsAfterMiss;
      endsEarly_ = false;
    } else if (++misses_ >= Executor::kSpinMissesBeforeSkips) {
      misses_ = 0;
      skips_ = kSpinSkipsAfterMiss;
      endsEarly_ = true;
    }
  }
  // Work was found without a spin (after a sleep, or already queued); `queuedNs`: when it was queued.
  void found(int64_t queuedNs) {
    if (skippedAt_ < 0 || !endsEarly_ || skips_ == 0 || queuedNs - skippedAt_ >= Executor::kSpinNs) return;
    skips_ = 0;
    probing_ = true;
  }

 private:
  int misses_ = 0;          // spins in a row that found no work
  int skips_ = 0;           // idle spells left that sleep without spinning
  bool endsEarly_ = true;   // the current run of skips ends at work that comes quickly
  bool probing_ = false;    // the next spin decides alone
  int64_t skippedAt_ = -1;  // when this spell skipped its spin; -1: it did not
};

// Refreshes the atomics that threads read without the lock, and wakes an idle worker for a queued
// engine that may run now. Holds st->mu.
void published(Executor::State* st) {
  bool canTake = st->turns.canTake();
  st->pending.store(canTake, std::memory_order_release);
  st->runningSlices.store(st->turns.held(), std::memory_order_relaxed);
  st->contended.store(st->turns.contended(), std::memory_order_relaxed);
  if (canTake && st->idleSpinners.load(std::memory_order_relaxed) == 0) st->wake.notify_one();
}

// Starts workers while queued engines outnumber idle ones, unless the threads that are not parked
// already fill every turn (a parked thread holds its guest's stack, not a turn). Holds st->mu.
void growIfNeeded(Executor::State* st) {
  while (st->turns.queued() > static_cast<size_t>(st->idle) &&
         st->threads - static_cast<int>(st->turns.parked()) < st->maxThreads && st->threads < Executor::kMaxThreads) {
    if (!startThread(workerMain, st, Executor::kThreadStackBytes)) return;  // try again on the next schedule
    st->threads++;
    st->idle++;
  }
}

// The turn of the executor thread running this one (for the time slice), and whether it is one.
thread_local bool onWorker = false;
thread_local int64_t turnStartNs = 0;      // steady clock
thread_local int64_t turnStartCpuNs = -1;  // this thread's CPU clock after a hand-over; -1: the slice's mark

std::vector<Executor::State::Slice>::iterator sliceOf(Executor::State* st, const Engine* engine) {
  return std::find_if(st->running.begin(), st->running.end(), [&](const auto& s) { return s.engine.get() == engine; });
}

// Reading the thread's CPU clock is a system call: a new slice uses the reading its guest takes at
// its first interrupt poll (the CPU mark) instead of one of its own.
void startTurn(bool readCpu) {
  turnStartNs = steadyNowNs();
  turnStartCpuNs = readCpu ? threadCpuNs() : -1;
}

void* workerMain(void* arg) {
  auto* st = static_cast<Executor::State*>(arg);
  onWorker = true;
  std::unique_lock<std::mutex> lock(st->mu);
  IdleSpinPolicy policy;
  while (true) {
    bool spun = false;
    if (!st->turns.canTake() && policy.spinNow(steadyNowNs) && Executor::instance().beginSpin(false)) {
      // The next eval or host result often comes within microseconds: look again briefly before
      // sleeping, which saves a futex wake-up.
      st->idleSpinners.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      bool found = spinUntil(Executor::kSpinNs, [st] { return st->pending.load(std::memory_order_acquire); });
      st->idleSpinners.fetch_sub(1, std::memory_order_relaxed);
      Executor::instance().endSpin();
      lock.lock();
      policy.spun(found);
      spun = true;
    }
    auto ready = [&] { return st->turns.canTake(); };
    if (st->threads > st->warmThreads) {
      if (!st->wake.wait_for(lock, std::chrono::nanoseconds(Executor::kIdleExitNs), ready)) {
        st->threads--;
        st->idle--;
        return nullptr;
      }
    } else {
      st->wake.wait(lock, ready);
    }
    if (!spun) policy.found(st->lastScheduledNs);
    std::shared_ptr<Engine> engine = st->turns.take();
    st->idle--;
    st->running.push_back({engine, true});
    published(st);
    lock.unlock();
    startTurn(false);
    bool again = engine->runSlice();
    lock.lock();
    auto slice = sliceOf(st, engine.get());
    bool holdsTurn = slice->holdsTurn;
    st->running.erase(slice);
    if (holdsTurn) st->turns.release();
    // The watchdog gave up on this slice and no longer counts this thread: leave.
    if (engine->broken()) {
      published(st);
      return nullptr;
    }
    st->idle++;
    if (again) {
      st->turns.enqueue(std::move(engine), false);
      st->lastScheduledNs = steadyNowNs();
    }
    published(st);
  }
}

// Starts workers for work that keeps waiting, and every kWatchdogPeriod looks for stuck slices and
// asks the LoopGuard how many guests may run at once.
void* watchdogMain(void* arg) {
  auto* st = static_cast<Executor::State*>(arg);
  auto nextCheck = std::chrono::steady_clock::now() + kWatchdogPeriod;
  LoopGuard guard;
  while (true) {
    std::vector<std::shared_ptr<Engine>> running;
    {
      std::unique_lock<std::mutex> lock(st->mu);
      if (st->growWake.wait_until(lock, nextCheck, [&] { return st->growWanted; })) {
        st->growWanted = false;
        lock.unlock();
        std::this_thread::sleep_for(kGrowDelay);
        lock.lock();
        growIfNeeded(st);
        continue;
      }
      nextCheck = std::chrono::steady_clock::now() + kWatchdogPeriod;
      for (const auto& slice : st->running) running.push_back(slice.engine);
      int64_t runDelayNs = mainThreadRunDelayNs();
      st->turns.setLimit(
          guard.allowed(runDelayNs, steadyNowNs(), st->cores, st->turns.held(), st->turns.demand(), runnableThreads));
      published(st);
    }
    for (auto& engine : running) {
      if (!engine->abandon(Executor::kWatchdogGraceNs)) continue;
      std::lock_guard<std::mutex> lock(st->mu);
      st->threads--;
      auto slice = sliceOf(st, engine.get());
      if (slice != st->running.end() && slice->holdsTurn) {
        slice->holdsTurn = false;
        st->turns.release();
      }
      growIfNeeded(st);
      published(st);
    }
  }
  return nullptr;
}

}  // namespace

Executor::Executor() : state_(new State()) {}

Executor& Executor::instance() {
  // Never destroyed: detached workers may still reference it while the process exits.
  static Executor* executor = new Executor();
  return *executor;
}

void Executor::readSystem(State* st) {
  if (st->systemRead) return;
  st->systemRead = true;
  st->maxThreads = maxThreadsFromEnv();
  st->cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  st->warmThreads = std::min(st->maxThreads, st->cores);
  st->turns.setMaxTurns(st->maxThreads);
}

void Executor::prepare() {
  std::lock_guard<std::mutex> lock(state_->mu);
  readSystem(state_);
}

void Executor::schedule(std::shared_ptr<Engine> engine) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->started) {
    state_->started = true;
    readSystem(state_);
    startThread(watchdogMain, state_, 256u << 10);
  }
  // An eval that has not run yet may go ahead of parked spinners (guest_turns.h).
  bool fresh = engine->awaitingSlice();
  state_->turns.enqueue(std::move(engine), fresh);
  state_->pending.store(state_->turns.canTake(), std::memory_order_release);
  state_->contended.store(state_->turns.contended(), std::memory_order_relaxed);
  state_->lastScheduledNs = steadyNowNs();
  if (state_->turns.queued() > static_cast<size_t>(state_->idle) &&
      state_->threads - static_cast<int>(state_->turns.parked()) < state_->maxThreads) {
    // The first workers start at once; later ones only for work that keeps waiting (kGrowDelay).
    if (state_->threads < state_->warmThreads) {
      growIfNeeded(state_);
    } else if (!state_->growWanted) {
      state_->growWanted = true;
      state_->growWake.notify_one();
    }
  }
  // A spinning worker takes queued work within microseconds: waking a sleeping one for it too would
  // cost a system call here and hand the engine to whichever gets the lock first. (A spinner that
  // gives up re-checks the queue under the lock before it sleeps.)
  if (state_->turns.canTake() &&
      state_->turns.queued() > static_cast<size_t>(state_->idleSpinners.load(std::memory_order_relaxed)))
    state_->wake.notify_one();
}

bool Executor::sliceUsedUp(int64_t markCpuNs) {
  if (!onWorker || !state_->contended.load(std::memory_order_relaxed)) return false;
  // CPU time never runs faster than wall time: the cheap clock rules most polls out.
  int64_t wallNs = steadyNowNs() - turnStartNs;
  if (wallNs < GuestTurns::kTimeSliceNs) return false;
  int64_t startCpuNs = turnStartCpuNs >= 0 ? turnStartCpuNs : markCpuNs;
  return wallNs >= GuestTurns::kTurnWallNs || threadCpuNs() - startCpuNs >= GuestTurns::kTimeSliceNs;
}

void Executor::handOver(const Engine* engine, const std::atomic<int>& stop) {
  State* st = state_;
  std::unique_lock<std::mutex> lock(st->mu);
  auto slice = sliceOf(st, engine);
  if (st->turns.contended() && slice != st->running.end() && slice->holdsTurn) {
    GuestTurns::Parked parked;
    parked.engine = engine;
    slice->holdsTurn = false;
    st->turns.park(&parked);
    growIfNeeded(st);
    published(st);
    parked.cv.wait(lock, [&] { return parked.granted || stop.load(std::memory_order_relaxed) != 0; });
    if (!parked.granted) st->turns.unpark(&parked);
    sliceOf(st, engine)->holdsTurn = true;  // `running` may have moved meanwhile
    published(st);
  }
  lock.unlock();
  startTurn(true);
}

void Executor::stopRequested(const Engine* engine) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (GuestTurns::Parked* p = state_->turns.parkedOf(engine)) p->cv.notify_one();
}

bool Executor::beginSpin(bool inSlice) {
  State* st = state_;
  // Threads that would want a core while this one spins: the Node main thread, the spinners and
  // the running slices (this one's own slice is the spinner itself).
  int others = st->runningSlices.load(std::memory_order_relaxed) - (inSlice ? 1 : 0);
  int spinning = st->spinners.load(std::memory_order_relaxed);
  while (true) {
    if (1 + others + spinning + 1 > st->cores) return false;
    if (st->spinners.compare_exchange_weak(spinning, spinning + 1, std::memory_order_acq_rel)) return true;
  }
}

bool Executor::mainMaySpin() { return state_->runningSlices.load(std::memory_order_relaxed) + 1 <= state_->cores; }

void Executor::endSpin() { state_->spinners.fetch_sub(1, std::memory_order_acq_rel); }

Executor::Counts Executor::counts() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return {state_->turns.held(), state_->maxThreads != 0 ? state_->maxThreads : maxThreadsFromEnv()};
}

}  // namespace qjsn
