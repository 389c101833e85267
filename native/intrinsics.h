// Built-in functions captured when a context is created, before any guest code runs. The
// codecs call these originals, never whatever the guest later puts on globalThis or on a
// prototype, so copying a value cannot be hijacked by guest code.
#pragma once

#include <string>
#include <vector>

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
  OwnedValue errorStack;   // Error.prototype's `stack` getter: returns the trace stored at creation
  OwnedValue objectProto;  // Object.prototype: a plain object's class name is not written
  JSClassID objectClassId = 0;
  // Atoms of the global names every fresh sandbox has (the snapshot writer's baseline), sorted,
  // made on the first snapshot (holdBaselineGlobals): the writer skips a built-in global by its
  // atom instead of copying out its name. Empty until then, or when one could not be made.
  std::vector<JSAtom> baselineGlobalAtoms;

  static constexpr const char* kFlagNames[8] = {"hasIndices", "global",  "ignoreCase",  "multiline",
                                                "dotAll",     "unicode", "unicodeSets", "sticky"};
  static constexpr char kFlagChars[8] = {'d', 'g', 'i', 'm', 's', 'u', 'v', 'y'};
  static constexpr const char* kErrorNames[static_cast<int>(ErrorCtor::Count)] = {
      "Error", "TypeError", "RangeError", "SyntaxError", "ReferenceError", "EvalError", "URIError"};

  // Returns false when the context lacks one of them (out of memory at creation).
  bool load(JSContext* ctx);
  // Makes baselineGlobalAtoms from the names (UTF-8); leaves it empty when an atom cannot be made.
  void holdBaselineGlobals(JSContext* ctx, const std::vector<std::string>& names);
  // Frees every captured value and atom; must run before the context is freed.
  void clear();

 private:
  void clearBaselineGlobals();
  JSContext* atomsCtx_ = nullptr;  // the context baselineGlobalAtoms belong to
};

}  // namespace qjsn
