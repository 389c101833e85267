#include "platform.h"

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX
#endif
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <malloc.h>
#include <process.h>
#else
#include <malloc.h>
#include <pthread.h>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace qjsn::platform {

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

}  // namespace

bool startDetachedThread(void* (*body)(void*), void* arg, size_t stackBytes) {
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

void lowerCurrentThreadPriority() {
  SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL);
}

ThreadCpuClock currentThreadCpuClock() { return GetCurrentThreadId(); }

int64_t threadCpuNs(ThreadCpuClock clock) {
  HANDLE thread = OpenThread(THREAD_QUERY_LIMITED_INFORMATION, FALSE, clock);
  if (thread == nullptr) return -1;
  FILETIME created, exited, kernel, user;
  BOOL ok = GetThreadTimes(thread, &created, &exited, &kernel, &user);
  CloseHandle(thread);
  return ok ? fileTimeNs(kernel) + fileTimeNs(user) : -1;
}

uintptr_t currentThreadStackLow() {
  ULONG_PTR low = 0, high = 0;
  GetCurrentThreadStackLimits(&low, &high);
  return static_cast<uintptr_t>(low);
}

size_t mallocUsableSize(void* p) { return p ? _msize(p) : 0; }

void releaseFreeHeap() { _heapmin(); }

#else  // POSIX

namespace {
constexpr int kLowPriorityNice = 10;
}

bool startDetachedThread(void* (*body)(void*), void* arg, size_t stackBytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stackBytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, body, arg);
  pthread_attr_destroy(&attr);
  return err == 0;
}

void lowerCurrentThreadPriority() {
#if defined(__linux__)
  // On Linux a nice value is per thread, addressed by its kernel thread id.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kLowPriorityNice);
#endif
}

ThreadCpuClock currentThreadCpuClock() {
  clockid_t clock = CLOCK_THREAD_CPUTIME_ID;
  pthread_getcpuclockid(pthread_self(), &clock);
  return clock;
}

int64_t threadCpuNs(ThreadCpuClock clock) {
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uintptr_t currentThreadStackLow() {
  pthread_attr_t attr;
  void* addr = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
  }
  return reinterpret_cast<uintptr_t>(addr);
}

size_t mallocUsableSize(void* p) { return p ? malloc_usable_size(p) : 0; }

void releaseFreeHeap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

#endif

}  // namespace qjsn::platform
