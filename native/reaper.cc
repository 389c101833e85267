#include "reaper.h"

#include <condition_variable>
#include <deque>
#include <mutex>

#include "platform.h"
#include "threads.h"

namespace qjsn {

namespace {

// Freeing is iterative in QuickJS; the stack only needs room for the allocator.
constexpr size_t kReaperStackBytes = 1u << 20;

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
    if (r.queue.empty()) {  // give the freed pages back once a burst of disposals is done
      lock.unlock();
      platform::releaseFreeHeap();
      lock.lock();
    }
  }
  return nullptr;
}

}  // namespace

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
