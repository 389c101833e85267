// Who runs guest code next: the executor's turns and time slices (the scheduler's policy; the
// executor in native/executor.cc owns the threads and calls this under its lock).
//
// A turn is the right to run guest code on an executor thread; at most `maxTurns` are held at once
// (QJSN_EXECUTOR_THREADS, fewer while the LoopGuard holds a core for the event loop). Everything
// that wants one waits in a single line, in arrival order: engines queued for a slice (no thread
// yet), and threads whose guest used up its time slice while others waited. QuickJS cannot set a
// running guest's C stack aside, so such a thread keeps it and sleeps until its turn comes back
// ("parked"). One exception to arrival order: an eval that has not run yet (fresh: most are
// trivial and end within microseconds) goes ahead of parked threads, at most kFreshBypasses times
// in a row; then the parked head has the next turn.
//
//   engine queued --turn free, thread idle--> running --slice ends--> turn passes on (below)
//   running --kTimeSliceNs of its own CPU (or kTurnWallNs) used while the line is not empty--> parked
//   parked --turn passed to it (or a stop for its eval: it only unwinds)--> running
//   a turn passes to: a fresh queued engine, if the parked head was passed over fewer than
//   kFreshBypasses times since it last had a turn; else the line's head, engine or parked thread
//
// So past the cap a fresh eval waits for one slice to end (the first of those running), not for a
// slice of every spinner parked ahead of it; no eval waits behind more than one time slice of each
// session ahead of it in the line plus kFreshBypasses slices of fresh evals (each of which, if it
// does not end in its first slice, parks at the tail like any other); and a spinning guest still
// gets its whole budget.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>

namespace qjsn {

class Engine;

class GuestTurns {
 public:
  // CPU time a guest may run while others wait for a turn before it hands its own over. Short
  // enough that a trivial eval behind a few spinners answers within tens of milliseconds; long
  // enough that a hand-over (a futex wake-up, tens of microseconds) costs under 1%.
  static constexpr int64_t kTimeSliceNs = 5 * 1000000LL;
  // Wall time after which a turn ends anyway while others wait: on a loaded machine a guest's
  // thread may get a small share of a core, and those waiting should not pay for that.
  static constexpr int64_t kTurnWallNs = 20 * 1000000LL;
  // Turns in a row that fresh evals may take ahead of the parked head: a parked guest waits at
  // most this many extra slices for its turn, however many fresh evals arrive.
  static constexpr int kFreshBypasses = 2;

  // A thread whose guest waits mid-slice for its turn to come back.
  struct Parked {
    const Engine* engine;
    uint64_t ticket = 0;
    bool granted = false;
    std::condition_variable cv;
  };

  void setMaxTurns(int n) { maxTurns_ = n; }
  // Fewer turns for a while (LoopGuard); a higher limit passes the freed turns on at once.
  void setLimit(int n) {
    limit_ = n;
    passOn();
  }
  int held() const { return held_; }
  size_t queued() const { return queue_.size(); }
  size_t parked() const { return parked_.size(); }
  // Turns wanted: held, and waited for.
  int demand() const { return held_ + static_cast<int>(queue_.size() + parked_.size()); }
  // More turns are held than allowed now, or something waits for one while every turn is held: a
  // running guest past its slice hands over.
  bool contended() const { return held_ > cap() || (held_ == cap() && (!queue_.empty() || !parked_.empty())); }

  // `fresh`: the engine's eval has not run yet (it may go ahead of parked threads).
  void enqueue(std::shared_ptr<Engine> engine, bool fresh) {
    queue_.push_back({std::move(engine), nextTicket_++, fresh});
    if (fresh) fresh_++;
  }
  // An idle thread may take a queued engine now.
  bool canTake() const { return held_ < cap() && queuedGoesFirst(); }
  // Takes the next queued engine and a turn with it (canTake() was true): the line's head, or the
  // first fresh engine when it goes ahead of the parked head.
  std::shared_ptr<Engine> take() {
    auto it = queue_.begin();
    if (!parked_.empty() && parked_.front()->ticket < it->ticket) {
      while (!it->fresh) ++it;
      bypasses_++;
    }
    std::shared_ptr<Engine> engine = std::move(it->engine);
    if (it->fresh) fresh_--;
    queue_.erase(it);
    held_++;
    return engine;
  }
  // A slice ended (or the watchdog gave up on one): its turn passes on.
  void release() {
    held_--;
    passOn();
  }
  // The running guest of `p` hands its turn over and joins the line's tail.
  void park(Parked* p) {
    p->ticket = nextTicket_++;
    if (parked_.empty()) bypasses_ = 0;
    parked_.push_back(p);
    held_--;
    passOn();
  }
  // A parked thread leaves the line without its turn coming (a stop for its eval: it unwinds,
  // briefly over the cap).
  void unpark(Parked* p) {
    for (auto it = parked_.begin(); it != parked_.end(); ++it) {
      if (*it != p) continue;
      parked_.erase(it);
      held_++;
      return;
    }
  }
  // The parked thread of `engine`, if any, to wake for a stop.
  Parked* parkedOf(const Engine* engine) const {
    for (Parked* p : parked_)
      if (p->engine == engine) return p;
    return nullptr;
  }

 private:
  struct Queued {
    std::shared_ptr<Engine> engine;
    uint64_t ticket;
    bool fresh;
  };
  // The next free turn goes to a queued engine (taken by an idle thread, which the executor wakes),
  // not to the parked head.
  bool queuedGoesFirst() const {
    if (queue_.empty()) return false;
    if (parked_.empty() || queue_.front().ticket < parked_.front()->ticket) return true;
    return fresh_ > 0 && bypasses_ < kFreshBypasses;
  }
  // Free turns go to the parked head while no queued engine goes first.
  void passOn() {
    while (held_ < cap() && !parked_.empty() && !queuedGoesFirst()) {
      Parked* p = parked_.front();
      parked_.pop_front();
      p->granted = true;
      held_++;
      bypasses_ = 0;
      p->cv.notify_one();
    }
  }

  int cap() const { return limit_ < maxTurns_ ? limit_ : maxTurns_; }

  int maxTurns_ = 1;
  int limit_ = 1 << 30;
  int held_ = 0;
  uint64_t nextTicket_ = 0;
  int fresh_ = 0;     // fresh engines in queue_
  int bypasses_ = 0;  // turns fresh engines took ahead of the parked head since it last had one
  std::deque<Queued> queue_;
  std::deque<Parked*> parked_;
};

// The event loop's edge over guests. Executor threads run at the process's own priority: below it
// (nice 10, as before) every ordinary process on a busy host starves them. The Node main thread is
// then one thread among the guests' for the kernel, and guests that fill every core can make it wait
// for one. The watchdog reads how long the main thread waited for a core (its run delay) every
// period; when that passed kLagNs within one while guests wanted every core, and the guests are
// what fills the cores (fewer other threads are ready to run than there are cores), guests get one
// turn fewer than there are cores for kHoldNs, so a core stays free for the loop. On a host busy
// with other processes that would only slow guests down: the loop waits there as every process
// does. A loop that does not wait (the usual case, even with every core busy: a thread that wakes
// from sleep preempts spinners) costs guests nothing.
class LoopGuard {
 public:
  static constexpr int64_t kLagNs = 2 * 1000000LL;
  static constexpr int64_t kHoldNs = 1000 * 1000000LL;

  // The turns guests may hold now. `runDelayNs`: the main thread's total run delay so far (-1:
  // unknown on this platform); `held`, `demand`: turns held, and held or waited for; `runnable()`:
  // threads of the machine ready to run now, the caller included (-1: unknown), read only on a lag.
  template <typename Runnable>
  int allowed(int64_t runDelayNs, int64_t nowNs, int cores, int held, int demand, Runnable runnable) {
    int64_t lag = runDelayNs >= 0 && lastDelayNs_ >= 0 ? runDelayNs - lastDelayNs_ : 0;
    lastDelayNs_ = runDelayNs;
    if (cores > 1 && lag >= kLagNs && demand >= cores) {
      int ready = runnable();
      // Ready threads other than the running guests and the caller: the loop, other processes.
      if (ready < 0 || ready - held - 1 < cores) holdUntilNs_ = nowNs + kHoldNs;
    }
    return nowNs < holdUntilNs_ ? cores - 1 : 1 << 30;
  }

 private:
  int64_t lastDelayNs_ = -1;
  int64_t holdUntilNs_ = 0;
};

}  // namespace qjsn
