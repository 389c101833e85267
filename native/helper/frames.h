// The frames of the channel between the addon and a helper process, as the helper writes and reads
// them: a header (u32 body length, u8 frame, u8 flags, u16 zero, u32 sandboxId; native/boundary.h
// QJSN_CHANNEL_SIZES) and a body of little-endian fields. Every read is bounds-checked: a frame
// that does not parse is a protocol error, never an out-of-range read.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../boundary.h"

namespace qjsn::helper {

class FrameOut {
 public:
  FrameOut(Frame frame, uint32_t sandboxId, bool direct) : buf_(channel::headerBytes, 0) {
    buf_[4] = static_cast<uint8_t>(frame);
    buf_[5] = direct ? channel::directFlag : 0;
    std::memcpy(&buf_[8], &sandboxId, 4);
  }
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void f64(double v) { raw(&v, 8); }
  void bytes(const uint8_t* data, size_t n) {
    u32(static_cast<uint32_t>(n));
    raw(data, n);
  }
  void bytes(const std::vector<uint8_t>& v) { bytes(v.data(), v.size()); }
  void string(const std::string& s) { bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }
  // The frame with its body length filled in.
  const std::vector<uint8_t>& done() {
    uint32_t n = static_cast<uint32_t>(buf_.size() - channel::headerBytes);
    std::memcpy(&buf_[0], &n, 4);
    return buf_;
  }

 private:
  void raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t> buf_;
};

class FrameIn {
 public:
  FrameIn(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool u8(uint8_t* v) { return raw(v, 1); }
  bool u32(uint32_t* v) { return raw(v, 4); }
  bool f64(double* v) { return raw(v, 8); }
  bool bytes(std::vector<uint8_t>* out) {
    uint32_t n = 0;
    if (!u32(&n) || n > static_cast<size_t>(end_ - p_)) return false;
    out->assign(p_, p_ + n);
    p_ += n;
    return true;
  }
  bool string(std::string* out) {
    uint32_t n = 0;
    if (!u32(&n) || n > static_cast<size_t>(end_ - p_)) return false;
    out->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }

 private:
  bool raw(void* out, size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) return false;
    std::memcpy(out, p_, n);
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace qjsn::helper
