// Guest values <-> wire bytes. Reading a guest value never runs guest code: own property
// descriptors are read instead of properties, accessors and Proxies are reported instead of
// followed, and built-in slots are read through the captured original built-ins.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "intrinsics.h"
#include "value_walk.h"
#include "wire.h"

namespace qjsn {

enum class CodecStatus {
  Ok,
  Unserializable,  // a function, symbol, accessor, Proxy... and the caller asked to throw
  TooLarge,        // depth, node or byte cap exceeded
  GuestException,  // the engine raised (out of memory, interrupt): the exception is pending
  InvalidData,     // malformed wire bytes
};

struct CodecError {
  CodecStatus status = CodecStatus::Ok;
  std::string message;
  std::string path;        // where in the value, e.g. `.a[3]`
  bool overBytes = false;  // TooLarge because of the byte cap (not depth or node count)
};

// What a copy for display may hold (native/boundary.h, Tag::More). Zero parts: an exact copy.
struct DisplayCut {
  uint32_t parts = 0;  // values and keys written, in depth-first order
  uint32_t depth = 0;  // containers nested deeper than this (the value itself is at 0) get no entries
};

// With a DisplayCut, the copy is for display only: once its parts are written, every container
// still open ends there, and containers nested deeper than its depth are written without entries
// (native/value_walk.h, Step::Cut); each keeps its count. The host then never receives, decodes or
// holds more of a huge value than a rendering of it can show.
class GuestEncoder {
 public:
  GuestEncoder(JSContext* ctx, const Intrinsics& intrinsics, WireWriter& out, const WireLimits& limits,
               bool describeUnserializable, DisplayCut display = {})
      : ctx_(ctx),
        in_(intrinsics),
        out_(out),
        limits_(limits),
        describe_(describeUnserializable),
        partsLeft_(display.parts == 0 ? UINT64_MAX : display.parts),
        displayDepth_(display.parts == 0 ? UINT32_MAX : display.depth) {}

  bool encode(JSValueConst value);
  // Encodes call arguments as one array value, without building a guest array first.
  bool encodeArguments(int argc, JSValueConst* argv);
  const CodecError& error() const { return error_; }

 private:
  bool encodeValue(JSValueConst v, uint32_t depth);
  bool encodeObject(JSValueConst v, uint32_t depth);
  bool encodeArray(JSValueConst v, uint32_t depth);
  bool encodePlain(JSValueConst v, uint32_t depth);
  bool encodeError(JSValueConst v);
  bool encodeRegExp(JSValueConst v);
  bool encodeCollection(JSValueConst v, bool isMap, uint32_t depth);
  bool encodeView(JSValueConst v, TypedKind kind);
  // False (TooLarge) when `n` more bytes would take the output past the byte cap.
  bool reserve(size_t n);
  bool overCap();
  // Turns what a shared writer or walk reported into this encoder's result.
  bool put(Put result);
  bool walked(Walk result);
  bool encodeString(JSValueConst s);
  bool opaque(OpaqueKind kind, const std::string& name);
  // An opaque value named by a guest string (a function's name, a symbol's description), kept as UTF-16.
  bool opaqueNamed(OpaqueKind kind, JSValueConst name);
  bool fail(CodecStatus status, std::string message);
  bool guestFailed();
  void prependPath(const std::string& segment);
  // A copy for display: counts one more part written.
  void spendPart() { partsLeft_ -= partsLeft_ > 0 && partsLeft_ != UINT64_MAX ? 1 : 0; }
  // A copy for display: true when a container at `depth` gets no more entries.
  bool cutsAt(uint32_t depth) const { return partsLeft_ == 0 || depth > displayDepth_; }
  OwnedValue dataProperty(JSValueConst obj, const char* name, bool walkPrototypes);
  // The class name of an object with prototype `proto`, as util.inspect finds it, or undefined.
  OwnedValue className(JSValueConst proto);

  JSContext* ctx_;
  const Intrinsics& in_;
  WireWriter& out_;
  const WireLimits& limits_;
  bool describe_;
  uint64_t partsLeft_;     // UINT64_MAX: an exact copy
  uint32_t displayDepth_;  // UINT32_MAX: an exact copy
  uint32_t nodes_ = 0;
  uint32_t nextId_ = 0;
  std::unordered_map<void*, uint32_t> ids_;
  CodecError error_;
};

class GuestDecoder : ValueBuilder {
 public:
  GuestDecoder(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits)
      : ValueBuilder(ctx, intrinsics, limits) {}

  // Returns JS_EXCEPTION on failure; error() says why (a guest exception may be pending).
  JSValue decode(WireReader& in);
  const CodecError& error() const { return error_; }

 private:
  // Any value: plain objects here, every other tag by the shared builder.
  JSValue readChild(WireReader& in, uint32_t depth) override;
  JSValue invalid(const char* what) override;
  JSValue guestFailed() override;

  uint32_t nodes_ = 0;
  CodecError error_;
};

}  // namespace qjsn
