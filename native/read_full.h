// Reads exactly `n` bytes from a blocking descriptor, across short reads and EINTR: both ends of the
// process tier's channel (native/helper_channel.cc, native/helper/helper.cc). POSIX only.
#pragma once

#include <errno.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace qjsn {

// False at end of file or on an error: the other end is gone.
inline bool readFull(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace qjsn
