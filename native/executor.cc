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

#include "platform.h"

namespace qjsn {

struct Executor::State {
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::shared_ptr<Engine>> queue;
  std::vector<std::shared_ptr<Engine>> running;  // engines a worker is inside right now
  std::atomic<bool> pending{false};               // mirrors !queue.empty() for spinning workers
  bool started = false;
};

namespace {

constexpr int64_t kSpinBeforeSleepNs = 50 * 1000;

int workerCount() {
  if (const char* env = std::getenv("QJSN_EXECUTOR_THREADS")) {
    int n = std::atoi(env);
    if (n > 0 && n <= 256) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::max(2u, hw));
}

void* workerMain(void* arg) {
  auto* st = static_cast<Executor::State*>(arg);
  // Guest code is batch work: when it competes with the Node event loop for a core, the event
  // loop must win, so a spinning guest never delays the server's other requests.
  platform::lowerCurrentThreadPriority();
  std::unique_lock<std::mutex> lock(st->mu);
  while (true) {
    if (st->queue.empty()) {
      // Host results usually come back within tens of microseconds: look again briefly before
      // sleeping, which saves a futex wake-up per awaited host call.
      lock.unlock();
      int64_t until = monotonicNs() + kSpinBeforeSleepNs;
      while (monotonicNs() < until && !st->pending.load(std::memory_order_acquire)) std::this_thread::yield();
      lock.lock();
    }
    st->wake.wait(lock, [&] { return !st->queue.empty(); });
    std::shared_ptr<Engine> engine = std::move(st->queue.front());
    st->queue.pop_front();
    st->pending.store(!st->queue.empty(), std::memory_order_release);
    st->running.push_back(engine);
    lock.unlock();
    bool again = engine->runSlice();
    lock.lock();
    st->running.erase(std::find(st->running.begin(), st->running.end(), engine));
    if (engine->broken()) return nullptr;  // the watchdog replaced this thread while it was stuck
    if (again) {
      st->queue.push_back(std::move(engine));
      st->pending.store(true, std::memory_order_release);
      st->wake.notify_one();
    }
  }
}

void* watchdogMain(void* arg) {
  auto* st = static_cast<Executor::State*>(arg);
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::vector<std::shared_ptr<Engine>> running;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      running = st->running;
    }
    int64_t now = monotonicNs();
    for (auto& engine : running) {
      if (engine->abandon(now, Executor::kWatchdogGraceNs)) platform::startDetachedThread(workerMain, st, Executor::kThreadStackBytes);
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
    for (int i = workerCount(); i > 0; i--) platform::startDetachedThread(workerMain, state_, kThreadStackBytes);
    platform::startDetachedThread(watchdogMain, state_, 256u << 10);
  }
  state_->queue.push_back(std::move(engine));
  state_->pending.store(true, std::memory_order_release);
  state_->wake.notify_one();
}

}  // namespace qjsn
