// Built-in functions captured when a context is created, before any guest code runs. The
// codecs call these originals, never whatever the guest later puts on globalThis or on a
// prototype, so copying a value cannot be hijacked by guest code.
#pragma once

#include "qjs_raii.h"

namespace qjsn {

enum class ErrorCtor : uint8_t {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
  Count
};

struct Intrinsics {
  OwnedValue mapCtor, mapSet, mapForEach;
  OwnedValue setCtor, setAdd, setForEach;
  OwnedValue sizeGetters[2];  // the `size` getters of Map.prototype and Set.prototype, in that order
  OwnedValue dateGetTime;
  OwnedValue regexpCtor, regexpSource;
  OwnedValue regexpFlagGetters[8];  // in canonical flag order "dgimsuvy"
  OwnedValue bigintCtor, bigintToString, bigintAsIntN;
  OwnedValue dataViewCtor, dataViewBuffer, dataViewByteOffset, dataViewByteLength;
  OwnedValue typedArrayLength;  // %TypedArray%.prototype's `length` getter: current, 0 when out of bounds
  OwnedValue errorCtors[static_cast<int>(ErrorCtor::Count)];
  OwnedValue errorStack;  // Error.prototype's `stack` getter: returns the trace stored at creation
  JSClassID objectClassId = 0;

  static constexpr const char* kFlagNames[8] = {"hasIndices", "global",  "ignoreCase",  "multiline",
                                                "dotAll",     "unicode", "unicodeSets", "sticky"};
  static constexpr char kFlagChars[8] = {'d', 'g', 'i', 'm', 's', 'u', 'v', 'y'};
  static constexpr const char* kErrorNames[static_cast<int>(ErrorCtor::Count)] = {
      "Error", "TypeError", "RangeError", "SyntaxError", "ReferenceError", "EvalError", "URIError"};

  // Returns false when the context lacks one of them (out of memory at creation).
  bool load(JSContext* ctx);
  // Frees every captured value; must run before the context is freed.
  void clear();
};

}  // namespace qjsn
