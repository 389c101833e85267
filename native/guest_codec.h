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

class GuestEncoder {
 public:
  GuestEncoder(JSContext* ctx, const Intrinsics& intrinsics, WireWriter& out, const WireLimits& limits,
               bool describeUnserializable)
      : ctx_(ctx), in_(intrinsics), out_(out), limits_(limits), describe_(describeUnserializable) {}

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
  OwnedValue dataProperty(JSValueConst obj, const char* name, bool walkPrototypes);

  JSContext* ctx_;
  const Intrinsics& in_;
  WireWriter& out_;
  const WireLimits& limits_;
  bool describe_;
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
