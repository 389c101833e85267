#include "reaper.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "platform.h"
#include "threads.h"

namespace qjsn {

namespace {

// Freeing is iterative in QuickJS; the stack only needs room for the allocator.
constexpr size_t kReaperStackBytes = 1u << 20;
constexpr int64_t kTrimEveryBytes = 64ll << 20;
std::atomic<int64_t> freedSinceTrim{0};
std::atomic<int64_t> trims{0};

struct Reaper {
  std::mutex mu;
  std::condition_variable ready;
  std::deque<std::shared_ptr<Engine>> queue;
  size_t pendingBytes = 0;
  double freedBytes = 0;
  bool started = false;
};

// Never destroyed: the detached thread may outlive static destruction at process exit.
Reaper& reaper() {
  static Reaper* r = new Reaper();
  return *r;
}

void* reap(void*) {
  lowerThreadPriority();
  Reaper& r = reaper();
  std::unique_lock<std::mutex> lock(r.mu);
  while (true) {
    r.ready.wait(lock, [&] { return !r.queue.empty(); });
    std::shared_ptr<Engine> engine = std::move(r.queue.front());
    r.queue.pop_front();
    size_t bytes = engine->memoryUsed();
    lock.unlock();
    engine.reset();  // the last reference: ~Engine frees the runtime here
    lock.lock();
    r.pendingBytes -= bytes;
    r.freedBytes += static_cast<double>(bytes);
    lock.unlock();
    returnMemoryToSystem(static_cast<int64_t>(bytes));
    lock.lock();
  }
  return nullptr;
}

}  // namespace

void returnMemoryToSystem(int64_t freedBytes) {
  int64_t before = freedSinceTrim.fetch_add(freedBytes, std::memory_order_relaxed);
  if (before + freedBytes < kTrimEveryBytes) return;
  // One thread wins the reset and trims; frees counted meanwhile count towards the next trim.
  if (freedSinceTrim.exchange(0, std::memory_order_relaxed) < kTrimEveryBytes) return;
  platform::releaseFreeHeap();
  trims.fetch_add(1, std::memory_order_relaxed);
}

double heapTrims() { return static_cast<double>(trims.load(std::memory_order_relaxed)); }

void freeOffThread(std::shared_ptr<Engine> engine) {
  Reaper& r = reaper();
  std::unique_lock<std::mutex> lock(r.mu);
  if (!r.started) r.started = startThread(reap, nullptr, kReaperStackBytes);
  if (!r.started) {
    lock.unlock();
    engine.reset();
    return;
  }
  r.pendingBytes += engine->memoryUsed();
  r.queue.push_back(std::move(engine));
  r.ready.notify_one();
}

ReaperBytes reaperBytes() {
  Reaper& r = reaper();
  std::lock_guard<std::mutex> lock(r.mu);
  return {r.pendingBytes, r.freedBytes};
}

}  // namespace qjsn
