// Portable Linux prebuilds only (CMakeLists.txt, QJSN_PORTABLE defines QJSN_GLIBC_FLOOR_SHIMS):
// libstdc++ waits on a steady-clock deadline with pthread_cond_clockwait, which glibc added in 2.30,
// and a prebuild must load on glibc 2.28. This hidden definition takes the calls of the addon and
// of the statically linked libstdc++; it waits with pthread_cond_timedwait (glibc 2.3.2) until the
// same instant on the realtime clock.
#if defined(QJSN_GLIBC_FLOOR_SHIMS)
#include <pthread.h>
#include <time.h>

#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) int pthread_cond_clockwait(pthread_cond_t* cond,
                                                                            pthread_mutex_t* mutex, clockid_t clock,
                                                                            const struct timespec* deadline) {
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, deadline);
  timespec now{}, realNow{};
  clock_gettime(clock, &now);
  clock_gettime(CLOCK_REALTIME, &realNow);
  int64_t leftNs = (static_cast<int64_t>(deadline->tv_sec) - now.tv_sec) * 1000000000 + (deadline->tv_nsec - now.tv_nsec);
  if (leftNs < 0) leftNs = 0;
  int64_t realDeadlineNs = static_cast<int64_t>(realNow.tv_sec) * 1000000000 + realNow.tv_nsec + leftNs;
  timespec realDeadline{static_cast<time_t>(realDeadlineNs / 1000000000), static_cast<long>(realDeadlineNs % 1000000000)};
  return pthread_cond_timedwait(cond, mutex, &realDeadline);
}
#endif
