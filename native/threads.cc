#include "threads.h"

#include <atomic>
#include <cstdio>

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX
#endif
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <process.h>
#else
#include <pthread.h>
#endif
#if defined(_MSC_VER)
#include <intrin.h>
#endif
#if defined(__linux__)
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace qjsn {

void cpuRelax() {
#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
  _mm_pause();
#elif defined(_MSC_VER) && defined(_M_ARM64)
  __yield();
#elif defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

namespace {
// False in a confined helper process (native/helper/), whose filter kills it on any open().
std::atomic<bool> procReadsAllowed{true};
}  // namespace

void disallowProcReads() { procReadsAllowed.store(false, std::memory_order_relaxed); }

#if defined(_WIN32)

namespace {

struct ThreadStart {
  void* (*body)(void*);
  void* arg;
};

unsigned __stdcall threadTrampoline(void* p) {
  ThreadStart start = *static_cast<ThreadStart*>(p);
  delete static_cast<ThreadStart*>(p);
  start.body(start.arg);
  return 0;
}

int64_t fileTimeNs(const FILETIME& t) {
  return static_cast<int64_t>((static_cast<uint64_t>(t.dwHighDateTime) << 32) | t.dwLowDateTime) * 100;
}

int64_t readThreadTimes(HANDLE thread) {
  FILETIME created, exited, kernel, user;
  if (!GetThreadTimes(thread, &created, &exited, &kernel, &user)) return -1;
  return fileTimeNs(kernel) + fileTimeNs(user);
}

}  // namespace

bool startThread(void* (*body)(void*), void* arg, size_t stackBytes) {
  auto* start = new ThreadStart{body, arg};
  // The stack size is a reservation, like a POSIX thread's: pages are committed as they are touched.
  uintptr_t handle = _beginthreadex(nullptr, static_cast<unsigned>(stackBytes), threadTrampoline, start,
                                    STACK_SIZE_PARAM_IS_A_RESERVATION, nullptr);
  if (handle == 0) {
    delete start;
    return false;
  }
  CloseHandle(reinterpret_cast<HANDLE>(handle));
  return true;
}

void lowerThreadPriority() { SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL); }

int64_t threadCpuNs() { return readThreadTimes(GetCurrentThread()); }

int64_t mainThreadRunDelayNs() { return -1; }

int runnableThreads() { return -1; }

int64_t coarseMonotonicNs() { return static_cast<int64_t>(GetTickCount64()) * 1000000; }

CpuClock CpuClock::ofCurrentThread() {
  CpuClock clock;
  clock.threadId_ = GetCurrentThreadId();
  return clock;
}

int64_t CpuClock::nowNs() const {
  HANDLE thread = OpenThread(THREAD_QUERY_LIMITED_INFORMATION, FALSE, threadId_);
  if (thread == nullptr) return -1;
  int64_t ns = readThreadTimes(thread);
  CloseHandle(thread);
  return ns;
}

#else  // POSIX

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

namespace {

// Two numbers of a small /proc file, as `format` finds them; false when it cannot be read.
bool readProcNumbers(const char* path, const char* format, unsigned long long* a, unsigned long long* b) {
#if defined(__linux__)
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return std::sscanf(buf, format, a, b) == 2;
#else
  (void)path, (void)format, (void)a, (void)b;
  return false;
#endif
}

}  // namespace

int64_t mainThreadRunDelayNs() {
  if (!procReadsAllowed.load(std::memory_order_relaxed)) return -1;
  // The thread group leader's: "<on-cpu ns> <run-delay ns> <slices>". A few microseconds a read.
  unsigned long long onCpu = 0, delay = 0;
  return readProcNumbers("/proc/self/schedstat", "%llu %llu", &onCpu, &delay) ? static_cast<int64_t>(delay) : -1;
}

int runnableThreads() {
  if (!procReadsAllowed.load(std::memory_order_relaxed)) return -1;
  // "<load 1> <load 5> <load 15> <runnable>/<threads> <last pid>"
  unsigned long long runnable = 0, all = 0;
  return readProcNumbers("/proc/loadavg", "%*s %*s %*s %llu/%llu", &runnable, &all) ? static_cast<int>(runnable) : -1;
}

#if !defined(CLOCK_MONOTONIC_COARSE)  // else inline in threads.h
int64_t coarseMonotonicNs() {
#if defined(__APPLE__)
  return static_cast<int64_t>(clock_gettime_nsec_np(CLOCK_UPTIME_RAW_APPROX));
#else
  return readClock(CLOCK_MONOTONIC);
#endif
}
#endif

CpuClock CpuClock::ofCurrentThread() {
  CpuClock clock;
  pthread_getcpuclockid(pthread_self(), &clock.id_);
  return clock;
}

int64_t CpuClock::nowNs() const { return readClock(id_); }

#endif

}  // namespace qjsn
