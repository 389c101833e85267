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

#include "threads.h"

namespace qjsn {

struct Executor::State {
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::shared_ptr<Engine>> queue;
  std::vector<std::shared_ptr<Engine>> running;  // engines a worker is inside right now
  std::atomic<bool> pending{false};              // mirrors !queue.empty() for spinning workers
  std::atomic<int> runningSlices{0};             // mirrors running.size() for beginSpin
  std::atomic<int> spinners{0};
  std::atomic<int> idleSpinners{0};  // workers spinning for work (not in a slice)
  int64_t lastScheduledNs = 0;       // when work was last queued (steady clock)
  int cores = 1;
  int threads = 0;  // workers counted against the cap (a thread stuck in a built-in is not)
  int idle = 0;     // workers looking for work, spinning or asleep
  int maxThreads = 0;
  int warmThreads = 0;  // kept even when idle: one per core
  bool started = false;
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

// Starts workers while queued engines outnumber idle ones and the cap allows. Holds st->mu.
void growIfNeeded(Executor::State* st) {
  while (st->queue.size() > static_cast<size_t>(st->idle) && st->threads < st->maxThreads) {
    if (!startThread(workerMain, st, Executor::kThreadStackBytes)) return;  // try again on the next schedule
    st->threads++;
    st->idle++;
  }
}

void* workerMain(void* arg) {
  auto* st = static_cast<Executor::State*>(arg);
  lowerThreadPriority();
  std::unique_lock<std::mutex> lock(st->mu);
  IdleSpinPolicy policy;
  while (true) {
    bool spun = false;
    if (st->queue.empty() && policy.spinNow(steadyNowNs) && Executor::instance().beginSpin(false)) {
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
    auto ready = [&] { return !st->queue.empty(); };
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
    std::shared_ptr<Engine> engine = std::move(st->queue.front());
    st->queue.pop_front();
    st->pending.store(!st->queue.empty(), std::memory_order_release);
    st->idle--;
    st->running.push_back(engine);
    st->runningSlices.store(static_cast<int>(st->running.size()), std::memory_order_relaxed);
    lock.unlock();
    bool again = engine->runSlice();
    lock.lock();
    st->running.erase(std::find(st->running.begin(), st->running.end(), engine));
    st->runningSlices.store(static_cast<int>(st->running.size()), std::memory_order_relaxed);
    // The watchdog gave up on this slice and no longer counts this thread: leave.
    if (engine->broken()) return nullptr;
    st->idle++;
    if (again) {
      st->queue.push_back(std::move(engine));
      st->pending.store(true, std::memory_order_release);
    }
  }
}

// Starts workers for work that keeps waiting, and every kWatchdogPeriod looks for stuck slices.
void* watchdogMain(void* arg) {
  auto* st = static_cast<Executor::State*>(arg);
  auto nextCheck = std::chrono::steady_clock::now() + kWatchdogPeriod;
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
      running = st->running;
    }
    for (auto& engine : running) {
      if (!engine->abandon(Executor::kWatchdogGraceNs)) continue;
      std::lock_guard<std::mutex> lock(st->mu);
      st->threads--;
      growIfNeeded(st);
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

void Executor::schedule(std::shared_ptr<Engine> engine) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->started) {
    state_->started = true;
    state_->maxThreads = maxThreadsFromEnv();
    state_->cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    state_->warmThreads = std::min(state_->maxThreads, state_->cores);
    startThread(watchdogMain, state_, 256u << 10);
  }
  state_->queue.push_back(std::move(engine));
  state_->pending.store(true, std::memory_order_release);
  state_->lastScheduledNs = steadyNowNs();
  if (state_->queue.size() > static_cast<size_t>(state_->idle) && state_->threads < state_->maxThreads) {
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
  if (state_->queue.size() > static_cast<size_t>(state_->idleSpinners.load(std::memory_order_relaxed)))
    state_->wake.notify_one();
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
  return {state_->threads, state_->maxThreads != 0 ? state_->maxThreads : maxThreadsFromEnv()};
}

}  // namespace qjsn
