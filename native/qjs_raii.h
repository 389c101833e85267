// Owners for QuickJS handles. Every JSValue the addon keeps is held by an OwnedValue, so a
// missed JS_FreeValue cannot happen on an early return (JS_FreeRuntime asserts on leaks).
#pragma once

#include <utility>

extern "C" {
#include "quickjs.h"
}

namespace qjsn {

// A counted reference to a guest value, freed with the context it belongs to.
class OwnedValue {
 public:
  OwnedValue() = default;
  OwnedValue(JSContext* ctx, JSValue value) : ctx_(ctx), value_(value) {}
  OwnedValue(const OwnedValue&) = delete;
  OwnedValue& operator=(const OwnedValue&) = delete;
  OwnedValue(OwnedValue&& other) noexcept : ctx_(other.ctx_), value_(other.release()) {}
  OwnedValue& operator=(OwnedValue&& other) noexcept {
    if (this != &other) {
      reset();
      ctx_ = other.ctx_;
      value_ = other.release();
    }
    return *this;
  }
  ~OwnedValue() { reset(); }

  // Takes a new reference to a borrowed value.
  static OwnedValue dup(JSContext* ctx, JSValueConst value) { return OwnedValue(ctx, JS_DupValue(ctx, value)); }

  JSValueConst get() const { return value_; }
  bool isException() const { return JS_IsException(value_); }
  JSValue release() {
    JSValue v = value_;
    value_ = JS_UNDEFINED;
    return v;
  }
  // Drops the reference; afterwards the owner no longer touches its context (which may be gone).
  void reset() {
    if (ctx_ && JS_VALUE_HAS_REF_COUNT(value_)) JS_FreeValue(ctx_, value_);
    value_ = JS_UNDEFINED;
    ctx_ = nullptr;
  }

 private:
  JSContext* ctx_ = nullptr;
  JSValue value_ = JS_UNDEFINED;
};

// An atom reference.
class OwnedAtom {
 public:
  OwnedAtom(JSContext* ctx, JSAtom atom) : ctx_(ctx), atom_(atom) {}
  OwnedAtom(const OwnedAtom&) = delete;
  OwnedAtom& operator=(const OwnedAtom&) = delete;
  ~OwnedAtom() {
    if (atom_ != JS_ATOM_NULL) JS_FreeAtom(ctx_, atom_);
  }
  JSAtom get() const { return atom_; }

 private:
  JSContext* ctx_;
  JSAtom atom_;
};

// The enumerated own keys of an object.
class OwnedPropertyEnum {
 public:
  explicit OwnedPropertyEnum(JSContext* ctx) : ctx_(ctx) {}
  OwnedPropertyEnum(const OwnedPropertyEnum&) = delete;
  OwnedPropertyEnum& operator=(const OwnedPropertyEnum&) = delete;
  ~OwnedPropertyEnum() {
    if (tab_) JS_FreePropertyEnum(ctx_, tab_, len_);
  }
  // Returns false (with a pending guest exception) on failure.
  bool load(JSValueConst obj, int flags) { return JS_GetOwnPropertyNames(ctx_, &tab_, &len_, obj, flags) == 0; }
  uint32_t size() const { return len_; }
  JSAtom atom(uint32_t i) const { return tab_[i].atom; }

 private:
  JSContext* ctx_;
  JSPropertyEnum* tab_ = nullptr;
  uint32_t len_ = 0;
};

// An own property descriptor; getter, setter and value are freed together.
struct OwnedDescriptor {
  JSContext* ctx;
  JSPropertyDescriptor desc{};
  bool loaded = false;
  explicit OwnedDescriptor(JSContext* c) : ctx(c) {}
  OwnedDescriptor(const OwnedDescriptor&) = delete;
  OwnedDescriptor& operator=(const OwnedDescriptor&) = delete;
  ~OwnedDescriptor() {
    if (loaded) {
      JS_FreeValue(ctx, desc.value);
      JS_FreeValue(ctx, desc.getter);
      JS_FreeValue(ctx, desc.setter);
    }
  }
  // 1: found, 0: absent, -1: exception pending.
  int load(JSValueConst obj, JSAtom prop) {
    int r = JS_GetOwnProperty(ctx, &desc, obj, prop);
    loaded = r == 1;
    return r;
  }
  bool isAccessor() const { return (desc.flags & JS_PROP_GETSET) != 0; }
};

// UTF-16 contents of a guest string (lone surrogates and NUL kept).
class GuestUtf16 {
 public:
  GuestUtf16(JSContext* ctx, JSValueConst str) : ctx_(ctx) { data_ = JS_ToCStringLenUTF16(ctx, &len_, str); }
  GuestUtf16(const GuestUtf16&) = delete;
  GuestUtf16& operator=(const GuestUtf16&) = delete;
  ~GuestUtf16() {
    if (data_) JS_FreeCStringUTF16(ctx_, data_);
  }
  const uint16_t* data() const { return data_; }
  size_t size() const { return len_; }
  bool ok() const { return data_ != nullptr; }

 private:
  JSContext* ctx_;
  const uint16_t* data_ = nullptr;
  size_t len_ = 0;
};

}  // namespace qjsn
