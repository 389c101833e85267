#include "platform.h"

#if defined(_WIN32)
#ifndef NOMINMAX
#define NOMINMAX
#endif
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <malloc.h>
#else
#include <malloc.h>
#include <pthread.h>
#endif

namespace qjsn::platform {

#if defined(_WIN32)

uintptr_t currentThreadStackLow() {
  ULONG_PTR low = 0, high = 0;
  GetCurrentThreadStackLimits(&low, &high);
  return static_cast<uintptr_t>(low);
}

size_t mallocUsableSize(void* p) { return p ? _msize(p) : 0; }

void releaseFreeHeap() { _heapmin(); }

#else  // POSIX

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
