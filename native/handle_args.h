// Typed reads of a method's payload arguments (code, names, bytes), and of the numbers of the
// shared slot arrays (native/boundary.h): no method reads a number as an argument. src/ validates
// everything before calling in, so these only keep the process alive: a value of the wrong type
// reads as that type's empty value. Nothing is coerced: a coercion is a call that could run JS.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "js_convert.h"

namespace qjsn {

// A number of a shared slot array (native/boundary.h) as an integer: NaN and negatives read as 0,
// values past the type's range as its largest (src/ validates them first; this keeps casts defined).
inline uint64_t slotU64(double v) {
  return v >= 18446744073709551616.0 ? UINT64_MAX : v >= 0 ? static_cast<uint64_t>(v) : 0;
}
inline uint32_t slotU32(double v) { return v >= 4294967296.0 ? UINT32_MAX : v >= 0 ? static_cast<uint32_t>(v) : 0; }
inline bool slotFlag(double v) { return v == 1; }

class HandleArgs {
 public:
  // The arguments from `first` on are numbered from 0.
  explicit HandleArgs(const Napi::CallbackInfo& info, size_t first = 0) : info_(info), first_(first) {}

  // True when at least `n` arguments were passed.
  bool has(size_t n) const { return info_.Length() >= first_ + n; }
  bool isArray(size_t i) const { return at(i).IsArray(); }
  bool isFunction(size_t i) const { return at(i).IsFunction(); }
  // The argument as it is (host results, read by EnvBridge).
  Napi::Value value(size_t i) const { return at(i); }

  // Read in one pass when it is short (measuring it first walks it once more).
  std::string utf8(size_t i) const {
    char shortText[256];
    size_t length;
    if (napi_get_value_string_utf8(info_.Env(), at(i), shortText, sizeof shortText, &length) != napi_ok) return {};
    // A string cut short stopped before a character of up to 4 bytes that did not fit.
    if (length + 4 < sizeof shortText - 1) return std::string(shortText, length);
    napi_get_value_string_utf8(info_.Env(), at(i), nullptr, 0, &length);
    std::string text(length, '\0');
    napi_get_value_string_utf8(info_.Env(), at(i), text.data(), length + 1, &length);
    return text;
  }
  std::vector<uint8_t> bytes(size_t i) const { return bytesOf(at(i)); }
  // Source code passed as a string, or as its UTF-8 bytes in a Uint8Array, copied as they are (the
  // parser refuses invalid UTF-8): bytes cost one copy, where a long string is measured and converted.
  std::string source(size_t i) const {
    Napi::Value v = at(i);
    if (!v.IsTypedArray()) return utf8(i);
    auto bytes = v.As<Napi::Uint8Array>();
    return std::string(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength());
  }
  // The strings of an array argument, as UTF-16 (lone surrogates kept).
  std::unordered_set<std::u16string> utf16Set(size_t i) const {
    std::unordered_set<std::u16string> out;
    Napi::Array items = at(i).As<Napi::Array>();
    for (uint32_t k = 0; k < items.Length(); k++) out.insert(items.Get(k).ToString().Utf16Value());
    return out;
  }

 private:
  Napi::Value at(size_t i) const { return info_[first_ + i]; }
  const Napi::CallbackInfo& info_;
  size_t first_;
};

}  // namespace qjsn
