// The one data format every value crosses the boundary in: guest -> host, host -> guest, and
// snapshots. It is data only (no code, no engine bytecode), little-endian, and every read is
// bounds-checked so a hostile or corrupted buffer fails cleanly.
//
//   value      := tag payload
//   string     := String u32 units, units * u16 (UTF-16, lone surrogates and NUL kept)
//               | Latin1 u32 length, length * u8 (every unit below 256)
//   objects    := numbered in the order they are first written; BACKREF u32 refers to one
//   tags       := native/boundary.h QJSN_WIRE_TAGS, each with its payload
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "boundary.h"

namespace qjsn {

// Longest decimal BigInt text read from the old format: its conversion is quadratic.
constexpr size_t kMaxDecimalBigIntDigits = 20000;

inline uint32_t typedKindElementSize(TypedKind k) {
  switch (k) {
    case TypedKind::Int8:
    case TypedKind::Uint8:
    case TypedKind::Uint8Clamped:
    case TypedKind::DataView: return 1;
    case TypedKind::Int16:
    case TypedKind::Uint16:
    case TypedKind::Float16: return 2;
    case TypedKind::Int32:
    case TypedKind::Uint32:
    case TypedKind::Float32: return 4;
    default: return 8;
  }
}

// Caps on one encoded value (native/boundary.h QJSN_COPY_LIMITS).
struct WireLimits {
#define QJSN_LIMIT_MEMBER(name, type, value) type name = value;
  QJSN_COPY_LIMITS(QJSN_LIMIT_MEMBER)
#undef QJSN_LIMIT_MEMBER
};

class WireWriter {
 public:
  WireWriter() { buf_.reserve(64); }
  std::vector<uint8_t>& bytes() { return buf_; }
  size_t size() const { return buf_.size(); }

  void tag(Tag t) { buf_.push_back(static_cast<uint8_t>(t)); }
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void f64(double v) { raw(&v, 8); }
  void i32(int32_t v) { raw(&v, 4); }
  void utf16(const uint16_t* units, size_t n) {
    u32(static_cast<uint32_t>(n));
    raw(units, n * 2);
  }
  // True when every unit fits in one byte (the string is written as Latin1).
  static bool narrow(const uint16_t* units, size_t n) {
    for (size_t i = 0; i < n; i++)
      if (units[i] >= 256) return false;
    return true;
  }
  // Bytes a whole string value takes, tag included.
  static size_t stringSize(size_t n, bool narrow) { return 5 + (narrow ? n : 2 * n); }
  // A whole string value (tag included), one byte per unit when they all fit.
  void string(const uint16_t* units, size_t n) { string(units, n, narrow(units, n)); }
  void string(const uint16_t* units, size_t n, bool narrow) {
    if (!narrow) {
      tag(Tag::String);
      utf16(units, n);
      return;
    }
    tag(Tag::Latin1);
    u32(static_cast<uint32_t>(n));
    size_t at = buf_.size();
    buf_.resize(at + n);
    for (size_t i = 0; i < n; i++) buf_[at + i] = static_cast<uint8_t>(units[i]);
  }
  // A whole string value from bytes that are Latin-1 (ASCII included).
  void latin1(const char* s, size_t n) {
    tag(Tag::Latin1);
    u32(static_cast<uint32_t>(n));
    raw(s, n);
  }
  void latin1(const std::string& s) { latin1(s.data(), s.size()); }
  void raw(const void* p, size_t n) {
    size_t at = buf_.size();
    buf_.resize(at + n);
    if (n) std::memcpy(&buf_[at], p, n);
  }
  // Overwrites a u32 written earlier (counts known only after the entries).
  void patchU32(size_t at, uint32_t v) { std::memcpy(&buf_[at], &v, 4); }
  // Drops what was written from `size` on.
  void truncate(size_t size) { buf_.resize(size); }

 private:
  std::vector<uint8_t> buf_;
};

class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  bool atEnd() const { return p_ == end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool tag(Tag* t) {
    uint8_t v;
    if (!u8(&v)) return false;
    *t = static_cast<Tag>(v);
    return true;
  }
  bool u8(uint8_t* v) { return raw(v, 1); }
  bool u32(uint32_t* v) { return raw(v, 4); }
  bool i32(int32_t* v) { return raw(v, 4); }
  bool f64(double* v) { return raw(v, 8); }
  // Points into the buffer (no copy). Unaligned: copy units out with memcpy.
  bool utf16(const uint8_t** units, uint32_t* n) {
    if (!u32(n)) return false;
    if (remaining() / 2 < *n) return false;
    *units = p_;
    p_ += static_cast<size_t>(*n) * 2;
    return true;
  }
  bool bytes(const uint8_t** data, size_t n) {
    if (remaining() < n) return false;
    *data = p_;
    p_ += n;
    return true;
  }
  bool raw(void* out, size_t n) {
    if (remaining() < n) return false;
    std::memcpy(out, p_, n);
    p_ += n;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Reads the payload of a string whose tag (String or Latin1) was already read.
inline bool readStringBody(WireReader& in, Tag t, std::u16string* out) {
  uint32_t n;
  const uint8_t* p;
  if (t == Tag::String) {
    if (!in.utf16(&p, &n)) return false;
    out->assign(n, u'\0');
    if (n) std::memcpy(&(*out)[0], p, static_cast<size_t>(n) * 2);
    return true;
  }
  if (t != Tag::Latin1 || !in.u32(&n) || !in.bytes(&p, n)) return false;
  out->resize(n);
  for (uint32_t i = 0; i < n; i++) (*out)[i] = p[i];
  return true;
}

// Reads a whole string value (either form) as UTF-16 units.
inline bool readString(WireReader& in, std::u16string* out) {
  Tag t;
  return in.tag(&t) && readStringBody(in, t, out);
}

}  // namespace qjsn
