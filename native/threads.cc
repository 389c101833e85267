#include "threads.h"

#include <pthread.h>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace qjsn {

namespace {

constexpr int kWorkerNice = 10;

int64_t readClock(clockid_t id) {
  timespec ts;
  if (clock_gettime(id, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

bool startThread(void* (*body)(void*), void* arg, size_t stackBytes) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setstacksize(&attr, stackBytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  bool started = pthread_create(&thread, &attr, body, arg) == 0;
  pthread_attr_destroy(&attr);
  return started;
}

void lowerThreadPriority() {
#if defined(__linux__)
  // Linux applies nice values per thread.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kWorkerNice);
#endif
}

int64_t threadCpuNs() { return readClock(CLOCK_THREAD_CPUTIME_ID); }

CpuClock CpuClock::ofCurrentThread() {
  CpuClock clock;
  pthread_getcpuclockid(pthread_self(), &clock.id_);
  return clock;
}

int64_t CpuClock::nowNs() const { return readClock(id_); }

}  // namespace qjsn
