// The operating-system services the addon needs beyond standard C++, one function each, so that
// every POSIX/Windows difference lives in platform.cc and the rest of native/ stays portable.
#pragma once

#include <cstddef>
#include <cstdint>

#if !defined(_WIN32)
#include <time.h>
#endif

namespace qjsn::platform {

// Starts a detached thread running body(arg) on a stack of stackBytes. False when the system
// refused (out of threads or memory); the caller then has no thread.
bool startDetachedThread(void* (*body)(void*), void* arg, size_t stackBytes);

// Lowers the calling thread's scheduling priority below the Node event loop's (nice 10 on Linux,
// below-normal on Windows), so a spinning guest never delays the host's other work.
void lowerCurrentThreadPriority();

// A handle through which any thread can read one thread's consumed CPU time.
#if defined(_WIN32)
using ThreadCpuClock = unsigned long;  // the thread id (a DWORD); opened per reading, nothing to close
#else
using ThreadCpuClock = clockid_t;
#endif

// The calling thread's CPU clock.
ThreadCpuClock currentThreadCpuClock();

// CPU nanoseconds the clock's thread has consumed, or -1 when it cannot be read.
int64_t threadCpuNs(ThreadCpuClock clock);

// Lowest address of the calling thread's stack, or 0 when the system does not say.
uintptr_t currentThreadStackLow();

// The allocator's usable size of a block from malloc (0 for null).
size_t mallocUsableSize(void* p);

// Hands the allocator's free pages back to the system where the allocator supports it.
void releaseFreeHeap();

}  // namespace qjsn::platform
