// Guest values <-> wire bytes. Reading a guest value never runs guest code: own property
// descriptors are read instead of properties, accessors and Proxies are reported instead of
// followed, and built-in slots are read through the captured original built-ins.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "intrinsics.h"
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
  std::string path;  // where in the value, e.g. `.a[3]`
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
  bool encodeString(JSValueConst s);
  bool encodeAtomKey(JSAtom atom);
  bool opaque(OpaqueKind kind, const std::string& name);
  // An opaque value named by a guest string (a function's name, a symbol's description), kept as UTF-16.
  bool opaqueNamed(OpaqueKind kind, JSValueConst name);
  bool fail(CodecStatus status, std::string message);
  bool guestFailed();
  void prependPath(const std::string& segment);
  OwnedValue dataProperty(JSValueConst obj, const char* name, bool walkPrototypes);
  friend JSValue collectionEntry(JSContext*, JSValueConst, int, JSValueConst*, int, void*);

  JSContext* ctx_;
  const Intrinsics& in_;
  WireWriter& out_;
  const WireLimits& limits_;
  bool describe_;
  uint32_t nodes_ = 0;
  uint32_t nextId_ = 0;
  std::unordered_map<void*, uint32_t> ids_;
  CodecError error_;
  // Set while a Map/Set is walked through its built-in forEach.
  bool collectionIsMap_ = false;
  uint32_t collectionDepth_ = 0;
  uint32_t collectionCount_ = 0;
};

class GuestDecoder {
 public:
  GuestDecoder(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits)
      : ctx_(ctx), in_(intrinsics), limits_(limits) {}
  ~GuestDecoder();
  GuestDecoder(const GuestDecoder&) = delete;
  GuestDecoder& operator=(const GuestDecoder&) = delete;

  // Returns JS_EXCEPTION on failure; error() says why (a guest exception may be pending).
  JSValue decode(WireReader& in);
  const CodecError& error() const { return error_; }

 private:
  JSValue decodeValue(WireReader& in, uint32_t depth);
  JSValue decodeString(WireReader& in);
  JSValue decodeBigInt(WireReader& in, bool hex);
  JSValue invalid(const char* what);
  JSValue guestFailed();
  JSValue remember(JSValue v);

  JSContext* ctx_;
  const Intrinsics& in_;
  const WireLimits& limits_;
  uint32_t nodes_ = 0;
  // One reference to each numbered object, for BACKREFs, released with the decoder. Owned, not
  // borrowed: malformed data can drop an object from the value being built (a duplicate key or
  // index, an Error stack that is not a string) and still refer to it later.
  std::vector<JSValue> objects_;
  CodecError error_;
};

}  // namespace qjsn
