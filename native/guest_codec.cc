#include "guest_codec.h"

#include <cmath>
#include <cstdio>

namespace qjsn {

namespace {

TypedKind typedKindOf(int qjsType) {
  switch (qjsType) {
    case JS_TYPED_ARRAY_UINT8C: return TypedKind::Uint8Clamped;
    case JS_TYPED_ARRAY_INT8: return TypedKind::Int8;
    case JS_TYPED_ARRAY_UINT8: return TypedKind::Uint8;
    case JS_TYPED_ARRAY_INT16: return TypedKind::Int16;
    case JS_TYPED_ARRAY_UINT16: return TypedKind::Uint16;
    case JS_TYPED_ARRAY_INT32: return TypedKind::Int32;
    case JS_TYPED_ARRAY_UINT32: return TypedKind::Uint32;
    case JS_TYPED_ARRAY_BIG_INT64: return TypedKind::BigInt64;
    case JS_TYPED_ARRAY_BIG_UINT64: return TypedKind::BigUint64;
    case JS_TYPED_ARRAY_FLOAT16: return TypedKind::Float16;
    case JS_TYPED_ARRAY_FLOAT32: return TypedKind::Float32;
    default: return TypedKind::Float64;
  }
}

JSTypedArrayEnum qjsTypeOf(TypedKind k) {
  switch (k) {
    case TypedKind::Uint8Clamped: return JS_TYPED_ARRAY_UINT8C;
    case TypedKind::Int8: return JS_TYPED_ARRAY_INT8;
    case TypedKind::Uint8: return JS_TYPED_ARRAY_UINT8;
    case TypedKind::Int16: return JS_TYPED_ARRAY_INT16;
    case TypedKind::Uint16: return JS_TYPED_ARRAY_UINT16;
    case TypedKind::Int32: return JS_TYPED_ARRAY_INT32;
    case TypedKind::Uint32: return JS_TYPED_ARRAY_UINT32;
    case TypedKind::BigInt64: return JS_TYPED_ARRAY_BIG_INT64;
    case TypedKind::BigUint64: return JS_TYPED_ARRAY_BIG_UINT64;
    case TypedKind::Float16: return JS_TYPED_ARRAY_FLOAT16;
    case TypedKind::Float32: return JS_TYPED_ARRAY_FLOAT32;
    default: return JS_TYPED_ARRAY_FLOAT64;
  }
}

// Parses an array index ("0".."4294967294") from an atom's string form.
bool parseIndex(const std::u16string& s, uint32_t* out) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == u'0')) return false;
  uint64_t v = 0;
  for (char16_t c : s) {
    if (c < u'0' || c > u'9') return false;
    v = v * 10 + (c - u'0');
  }
  if (v >= 0xFFFFFFFFull) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

std::string utf8Of(JSContext* ctx, JSValueConst v) {
  size_t len = 0;
  const char* s = JS_ToCStringLen(ctx, &len, v);
  if (!s) {
    JS_FreeValue(ctx, JS_GetException(ctx));
    return std::string();
  }
  std::string out(s, len);
  JS_FreeCString(ctx, s);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Encoder

bool GuestEncoder::encode(JSValueConst value) { return encodeValue(value, 0); }

bool GuestEncoder::encodeArguments(int argc, JSValueConst* argv) {
  out_.tag(Tag::Array);
  out_.u32(static_cast<uint32_t>(argc));
  out_.u32(static_cast<uint32_t>(argc));
  nextId_++;  // the array itself is object number 0, as if it had been encoded
  for (int i = 0; i < argc; i++) {
    out_.u32(static_cast<uint32_t>(i));
    if (!encodeValue(argv[i], 1)) {
      prependPath("[" + std::to_string(i) + "]");
      return false;
    }
  }
  return true;
}

bool GuestEncoder::fail(CodecStatus status, std::string message) {
  error_.status = status;
  error_.message = std::move(message);
  return false;
}

bool GuestEncoder::guestFailed() { return fail(CodecStatus::GuestException, "the engine raised while copying"); }

void GuestEncoder::prependPath(const std::string& segment) { error_.path = segment + error_.path; }

bool GuestEncoder::opaque(OpaqueKind kind, const std::string& name) {
  if (!describe_) {
    std::string what = opaqueKindName(kind);
    if (!name.empty()) what += " '" + name + "'";
    const char* why = kind == OpaqueKind::Accessor ? " (getters are never run)"
                      : kind == OpaqueKind::Proxy  ? " (Proxy traps are never run)"
                                                   : "";
    return fail(CodecStatus::Unserializable, "a " + what + " cannot be copied out of the sandbox" + why);
  }
  out_.tag(Tag::Opaque);
  out_.u8(static_cast<uint8_t>(kind));
  out_.latin1(name);
  return true;
}

bool GuestEncoder::opaqueNamed(OpaqueKind kind, JSValueConst name) {
  if (!JS_IsString(name)) return opaque(kind, "");
  if (!describe_) return opaque(kind, utf8Of(ctx_, name));
  out_.tag(Tag::Opaque);
  out_.u8(static_cast<uint8_t>(kind));
  return encodeString(name);
}

bool GuestEncoder::reserve(size_t n) {
  if (out_.size() + n <= limits_.maxBytes) return true;
  error_.overBytes = true;
  return fail(CodecStatus::TooLarge, "the value is larger than " + std::to_string(limits_.maxBytes) + " bytes");
}

bool GuestEncoder::encodeString(JSValueConst s) {
  GuestUtf16 u(ctx_, s);
  if (!u.ok()) return guestFailed();
  bool narrow = WireWriter::narrow(u.data(), u.size());
  if (!reserve(WireWriter::stringSize(u.size(), narrow))) return false;
  out_.string(u.data(), u.size(), narrow);
  return true;
}

bool GuestEncoder::encodeAtomKey(JSAtom atom) {
  OwnedValue key(ctx_, JS_AtomToValue(ctx_, atom));
  if (key.isException()) return guestFailed();
  if (JS_VALUE_GET_TAG(key.get()) == JS_TAG_INT) {
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%d", JS_VALUE_GET_INT(key.get()));
    out_.latin1(buf, static_cast<size_t>(n));
    return true;
  }
  return encodeString(key.get());
}

bool GuestEncoder::encodeValue(JSValueConst v, uint32_t depth) {
  if (++nodes_ > limits_.maxNodes)
    return fail(CodecStatus::TooLarge, "the value has more than " + std::to_string(limits_.maxNodes) + " parts");
  if (!reserve(16)) return false;  // room for any scalar; strings and buffers reserve their size
  switch (JS_VALUE_GET_NORM_TAG(v)) {
    case JS_TAG_UNDEFINED: out_.tag(Tag::Undefined); return true;
    case JS_TAG_NULL: out_.tag(Tag::Null); return true;
    case JS_TAG_BOOL: out_.tag(JS_VALUE_GET_BOOL(v) ? Tag::True : Tag::False); return true;
    case JS_TAG_INT: out_.tag(Tag::Int32); out_.i32(JS_VALUE_GET_INT(v)); return true;
    case JS_TAG_FLOAT64: out_.tag(Tag::Float64); out_.f64(JS_VALUE_GET_FLOAT64(v)); return true;
    case JS_TAG_STRING:
    case JS_TAG_STRING_ROPE: return encodeString(v);
    case JS_TAG_BIG_INT:
    case JS_TAG_SHORT_BIG_INT: {
      // Hex, not decimal: linear to write here and to read on the other side.
      JSValueConst radix[1] = {JS_NewInt32(ctx_, 16)};
      OwnedValue text(ctx_, JS_Call(ctx_, in_.bigintToString.get(), v, 1, radix));
      if (text.isException()) return guestFailed();
      out_.tag(Tag::BigIntHex);
      return encodeString(text.get());
    }
    case JS_TAG_SYMBOL: {
      // The description comes from the symbol's atom: `Symbol.prototype.description` is a getter
      // guest code can replace.
      JSAtom atom = JS_ValueToAtom(ctx_, v);
      if (atom == JS_ATOM_NULL) return guestFailed();
      OwnedAtom owned(ctx_, atom);
      OwnedValue description(ctx_, JS_AtomToString(ctx_, atom));
      if (description.isException()) return guestFailed();
      return opaqueNamed(OpaqueKind::Symbol, description.get());
    }
    case JS_TAG_OBJECT: return encodeObject(v, depth);
    default: return opaque(OpaqueKind::Other, "");
  }
}

OwnedValue GuestEncoder::dataProperty(JSValueConst obj, const char* name, bool walkPrototypes) {
  OwnedAtom atom(ctx_, JS_NewAtom(ctx_, name));
  OwnedValue cur = OwnedValue::dup(ctx_, obj);
  for (int hops = 0; hops < 64 && JS_IsObject(cur.get()) && !JS_IsProxy(cur.get()); hops++) {
    OwnedDescriptor d(ctx_);
    int r = d.load(cur.get(), atom.get());
    if (r < 0) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      break;
    }
    if (r == 1) {
      JSValueConst val = d.desc.value;
      if (d.isAccessor() || JS_IsObject(val) || JS_IsSymbol(val) || JS_IsUndefined(val)) break;
      return OwnedValue(ctx_, JS_ToString(ctx_, val));  // a primitive: runs no guest code
    }
    if (!walkPrototypes) break;
    cur = OwnedValue(ctx_, JS_GetPrototype(ctx_, cur.get()));
  }
  return OwnedValue(ctx_, JS_UNDEFINED);
}

bool GuestEncoder::encodeObject(JSValueConst v, uint32_t depth) {
  void* ptr = JS_VALUE_GET_PTR(v);
  auto seen = ids_.find(ptr);
  if (seen != ids_.end()) {
    out_.tag(Tag::BackRef);
    out_.u32(seen->second);
    return true;
  }
  if (depth >= limits_.maxDepth)
    return fail(CodecStatus::TooLarge, "the value is nested deeper than " + std::to_string(limits_.maxDepth) + " levels");
  if (JS_IsProxy(v)) return opaque(OpaqueKind::Proxy, "");
  if (JS_IsFunction(ctx_, v)) {
    OwnedValue name = dataProperty(v, "name", false);
    return opaqueNamed(OpaqueKind::Function, name.get());
  }
  if (JS_IsPromise(v)) return opaque(OpaqueKind::Promise, "");
  if (JS_IsWeakMap(v) || JS_IsWeakSet(v) || JS_IsWeakRef(v)) return opaque(OpaqueKind::WeakCollection, "");

  ids_.emplace(ptr, nextId_++);
  if (JS_IsArray(v)) return encodeArray(v, depth);
  if (JS_IsDate(v)) {
    OwnedValue t(ctx_, JS_Call(ctx_, in_.dateGetTime.get(), v, 0, nullptr));
    double d = 0;
    if (t.isException() || JS_ToFloat64(ctx_, &d, t.get()) < 0) return guestFailed();
    out_.tag(Tag::Date);
    out_.f64(d);
    return true;
  }
  if (JS_IsRegExp(v)) return encodeRegExp(v);
  if (JS_IsError(v)) return encodeError(v);
  if (JS_IsMap(v)) return encodeCollection(v, true, depth);
  if (JS_IsSet(v)) return encodeCollection(v, false, depth);
  if (JS_IsArrayBuffer(v)) {
    size_t size = 0;
    uint8_t* data = JS_GetArrayBuffer(ctx_, &size, v);
    if (!data) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));  // detached: copies as empty
      size = 0;
    }
    if (!reserve(5 + size)) return false;
    out_.tag(Tag::ArrayBuffer);
    out_.u32(static_cast<uint32_t>(size));
    out_.raw(data, size);
    return true;
  }
  int typed = JS_GetTypedArrayType(v);
  if (typed >= 0) return encodeView(v, typedKindOf(typed));
  if (JS_IsDataView(v)) return encodeView(v, TypedKind::DataView);
  if (JS_GetClassID(v) != in_.objectClassId) {
    ids_.erase(ptr);
    nextId_--;
    return opaque(OpaqueKind::Other, "");
  }
  return encodePlain(v, depth);
}

bool GuestEncoder::encodeArray(JSValueConst v, uint32_t depth) {
  int64_t length = 0;
  if (JS_GetLength(ctx_, v, &length) < 0) return guestFailed();
  OwnedPropertyEnum keys(ctx_);
  if (!keys.load(v, JS_GPN_STRING_MASK)) return guestFailed();
  out_.tag(Tag::Array);
  out_.u32(static_cast<uint32_t>(length));
  size_t countAt = out_.size();
  out_.u32(0);
  uint32_t count = 0;
  std::u16string keyText;
  for (uint32_t i = 0; i < keys.size(); i++) {
    JSAtom atom = keys.atom(i);
    OwnedValue key(ctx_, JS_AtomToValue(ctx_, atom));
    uint32_t index;
    if (JS_VALUE_GET_TAG(key.get()) == JS_TAG_INT) {
      index = static_cast<uint32_t>(JS_VALUE_GET_INT(key.get()));
    } else {
      GuestUtf16 u(ctx_, key.get());
      if (!u.ok()) return guestFailed();
      keyText.assign(reinterpret_cast<const char16_t*>(u.data()), u.size());
      if (!parseIndex(keyText, &index)) continue;  // named properties of arrays are not copied
    }
    OwnedDescriptor d(ctx_);
    int r = d.load(v, atom);
    if (r < 0) return guestFailed();
    if (r == 0) continue;
    out_.u32(index);
    bool ok = d.isAccessor() ? opaque(OpaqueKind::Accessor, "") : encodeValue(d.desc.value, depth + 1);
    if (!ok) {
      prependPath("[" + std::to_string(index) + "]");
      return false;
    }
    count++;
  }
  out_.patchU32(countAt, count);
  return true;
}

bool GuestEncoder::encodePlain(JSValueConst v, uint32_t depth) {
  OwnedValue proto(ctx_, JS_GetPrototype(ctx_, v));
  OwnedPropertyEnum keys(ctx_);
  if (!keys.load(v, JS_GPN_STRING_MASK | JS_GPN_ENUM_ONLY)) return guestFailed();
  out_.tag(Tag::Object);
  out_.u8(JS_IsNull(proto.get()) ? 1 : 0);
  size_t countAt = out_.size();
  out_.u32(0);
  uint32_t count = 0;
  for (uint32_t i = 0; i < keys.size(); i++) {
    OwnedDescriptor d(ctx_);
    int r = d.load(v, keys.atom(i));
    if (r < 0) return guestFailed();
    if (r == 0 || !(d.desc.flags & JS_PROP_ENUMERABLE)) continue;
    if (!encodeAtomKey(keys.atom(i))) return false;
    bool ok = d.isAccessor() ? opaque(OpaqueKind::Accessor, "") : encodeValue(d.desc.value, depth + 1);
    if (!ok) {
      prependPath("." + utf8Of(ctx_, OwnedValue(ctx_, JS_AtomToValue(ctx_, keys.atom(i))).get()));
      return false;
    }
    count++;
  }
  out_.patchU32(countAt, count);
  return true;
}

bool GuestEncoder::encodeError(JSValueConst v) {
  OwnedValue name = dataProperty(v, "name", true);
  OwnedValue message = dataProperty(v, "message", true);
  OwnedValue stack = dataProperty(v, "stack", false);
  if (JS_IsUndefined(stack.get())) {
    // A genuine Error keeps its trace in an internal slot behind the built-in getter, which only
    // reads that slot (Error.prepareStackTrace ran when the error was created, not now).
    stack = OwnedValue(ctx_, JS_Call(ctx_, in_.errorStack.get(), v, 0, nullptr));
  }
  if (name.isException() || message.isException() || stack.isException()) return guestFailed();
  out_.tag(Tag::Error);
  if (JS_IsString(name.get())) {
    if (!encodeString(name.get())) return false;
  } else {
    out_.latin1("Error");
  }
  if (JS_IsString(message.get())) {
    if (!encodeString(message.get())) return false;
  } else {
    out_.latin1("");
  }
  if (JS_IsString(stack.get())) return encodeString(stack.get());
  out_.tag(Tag::Undefined);
  return true;
}

bool GuestEncoder::encodeRegExp(JSValueConst v) {
  OwnedValue source(ctx_, JS_Call(ctx_, in_.regexpSource.get(), v, 0, nullptr));
  if (source.isException()) return guestFailed();
  std::string flags;
  for (int i = 0; i < 8; i++) {
    OwnedValue on(ctx_, JS_Call(ctx_, in_.regexpFlagGetters[i].get(), v, 0, nullptr));
    if (on.isException()) return guestFailed();
    if (JS_ToBool(ctx_, on.get()) == 1) flags += Intrinsics::kFlagChars[i];
  }
  out_.tag(Tag::RegExp);
  if (!encodeString(source.get())) return false;
  out_.latin1(flags);
  return true;
}

JSValue collectionEntry(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int, void* opaque) {
  auto* self = static_cast<GuestEncoder*>(opaque);
  JSValueConst value = argc > 0 ? argv[0] : JS_UNDEFINED;
  JSValueConst key = argc > 1 ? argv[1] : JS_UNDEFINED;
  bool ok = true;
  if (self->collectionIsMap_) {
    ok = self->encodeValue(key, self->collectionDepth_ + 1) && self->encodeValue(value, self->collectionDepth_ + 1);
  } else {
    ok = self->encodeValue(value, self->collectionDepth_ + 1);
  }
  if (!ok) return JS_ThrowInternalError(ctx, "copy stopped");
  self->collectionCount_++;
  return JS_UNDEFINED;
}

bool GuestEncoder::encodeCollection(JSValueConst v, bool isMap, uint32_t depth) {
  out_.tag(isMap ? Tag::Map : Tag::Set);
  size_t countAt = out_.size();
  out_.u32(0);
  bool savedIsMap = collectionIsMap_;
  uint32_t savedDepth = collectionDepth_, savedCount = collectionCount_;
  collectionIsMap_ = isMap;
  collectionDepth_ = depth;
  collectionCount_ = 0;
  OwnedValue callback(ctx_, JS_NewCClosure(ctx_, collectionEntry, "", nullptr, 2, 0, this));
  bool ok = !callback.isException();
  if (ok) {
    JSValueConst args[1] = {callback.get()};
    OwnedValue r(ctx_, JS_Call(ctx_, (isMap ? in_.mapForEach : in_.setForEach).get(), v, 1, args));
    if (r.isException()) {
      if (error_.status != CodecStatus::Ok) JS_FreeValue(ctx_, JS_GetException(ctx_));  // our own stop signal
      else error_.status = CodecStatus::GuestException;
      ok = false;
    }
  } else {
    error_.status = CodecStatus::GuestException;
  }
  uint32_t count = collectionCount_;
  collectionIsMap_ = savedIsMap;
  collectionDepth_ = savedDepth;
  collectionCount_ = savedCount;
  if (!ok) {
    if (error_.message.empty()) error_.message = "the engine raised while copying";
    prependPath(isMap ? ".<map entry>" : ".<set entry>");
    return false;
  }
  out_.patchU32(countAt, count);
  return true;
}

// A view crosses with exactly its own bytes, so a small view never carries the rest of a large
// buffer. It refers to its buffer only when the value already copied that buffer itself: then
// both keep sharing it on the other side.
bool GuestEncoder::encodeView(JSValueConst v, TypedKind kind) {
  size_t offset = 0, byteLength = 0;
  OwnedValue buffer;
  if (kind == TypedKind::DataView) {
    buffer = OwnedValue(ctx_, JS_Call(ctx_, in_.dataViewBuffer.get(), v, 0, nullptr));
    OwnedValue off(ctx_, JS_Call(ctx_, in_.dataViewByteOffset.get(), v, 0, nullptr));
    OwnedValue len(ctx_, JS_Call(ctx_, in_.dataViewByteLength.get(), v, 0, nullptr));
    int64_t o = 0, l = 0;
    if (off.isException() || len.isException() || JS_ToInt64(ctx_, &o, off.get()) < 0 || JS_ToInt64(ctx_, &l, len.get()) < 0) {
      buffer = OwnedValue(ctx_, JS_EXCEPTION);
    } else {
      offset = static_cast<size_t>(o);
      byteLength = static_cast<size_t>(l);
    }
  } else {
    // The length getter, not the engine's stored length: a length-tracking view over a resized
    // buffer has a current length that differs from the one it was created with.
    buffer = OwnedValue(ctx_, JS_GetTypedArrayBuffer(ctx_, v, &offset, nullptr, nullptr));
    OwnedValue len(ctx_, JS_Call(ctx_, in_.typedArrayLength.get(), v, 0, nullptr));
    int64_t n = 0;
    if (len.isException() || JS_ToInt64(ctx_, &n, len.get()) < 0) buffer = OwnedValue(ctx_, JS_EXCEPTION);
    byteLength = static_cast<size_t>(n) * typedKindElementSize(kind);
  }
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (!buffer.isException()) data = JS_GetArrayBuffer(ctx_, &size, buffer.get());
  if (!data || offset > size || byteLength > size - offset) {
    // Detached, or out of bounds of a shrunk resizable buffer: such a view reads as empty.
    if (JS_HasException(ctx_)) JS_FreeValue(ctx_, JS_GetException(ctx_));
    offset = byteLength = 0;
  }
  uint32_t elementSize = typedKindElementSize(kind);
  out_.tag(Tag::TypedArray);
  out_.u8(static_cast<uint8_t>(kind));
  auto seen = buffer.isException() ? ids_.end() : ids_.find(JS_VALUE_GET_PTR(buffer.get()));
  if (seen != ids_.end()) {
    out_.tag(Tag::BackRef);
    out_.u32(seen->second);
    out_.u32(static_cast<uint32_t>(offset));
  } else {
    if (!reserve(byteLength + 16)) return false;
    nextId_++;  // the copy is an object of its own for the decoder
    out_.tag(Tag::ArrayBuffer);
    out_.u32(static_cast<uint32_t>(byteLength));
    out_.raw(data ? data + offset : nullptr, byteLength);
    out_.u32(0);
  }
  out_.u32(static_cast<uint32_t>(byteLength / elementSize));
  return true;
}

// ---------------------------------------------------------------------------------------------
// Decoder

JSValue GuestDecoder::invalid(const char* what) {
  error_.status = CodecStatus::InvalidData;
  error_.message = std::string("malformed value data: ") + what;
  return JS_EXCEPTION;
}

JSValue GuestDecoder::guestFailed() {
  if (error_.status == CodecStatus::Ok) {
    error_.status = CodecStatus::GuestException;
    error_.message = "the engine raised while copying in";
  }
  return JS_EXCEPTION;
}

GuestDecoder::~GuestDecoder() {
  for (JSValue v : objects_) JS_FreeValue(ctx_, v);
}

JSValue GuestDecoder::remember(JSValue v) {
  if (!JS_IsException(v)) objects_.push_back(JS_DupValue(ctx_, v));
  return v;
}

JSValue GuestDecoder::decode(WireReader& in) {
  JSValue v = decodeValue(in, 0);
  if (!JS_IsException(v) && !in.atEnd()) {
    JS_FreeValue(ctx_, v);
    return invalid("trailing bytes");
  }
  return v;
}

JSValue GuestDecoder::decodeString(WireReader& in) {
  std::u16string s;
  if (!readString(in, &s)) return invalid("bad string");
  JSValue v = JS_NewStringUTF16(ctx_, reinterpret_cast<const uint16_t*>(s.data()), s.size());
  return JS_IsException(v) ? guestFailed() : v;
}

// Hex text goes through BigInt("0x...") and BigInt.asIntN, both linear. A negative value is
// read as the two's complement of its magnitude one digit wider, so no arithmetic is needed.
JSValue GuestDecoder::decodeBigInt(WireReader& in, bool hex) {
  std::u16string text;
  if (!readString(in, &text)) return invalid("bad BigInt");
  bool negative = !text.empty() && text[0] == u'-';
  size_t digits = text.size() - (negative ? 1 : 0);
  if (digits == 0 || (!hex && digits > kMaxDecimalBigIntDigits)) return invalid("bad BigInt");
  std::string ascii = hex ? "0x" : "";
  if (!hex && negative) ascii += '-';
  if (hex && negative) ascii += 'f';  // the wider digit: the sign
  bool carry = hex && negative;       // two's complement: invert every digit, then add one
  size_t start = ascii.size();
  ascii.resize(start + digits);
  for (size_t i = digits; i-- > 0;) {
    char16_t c = text[text.size() - digits + i];
    int d = c >= u'0' && c <= u'9' ? c - u'0' : hex && c >= u'a' && c <= u'f' ? c - u'a' + 10 : -1;
    if (d < 0) return invalid("bad BigInt");
    if (hex && negative) {
      d = 15 - d + (carry ? 1 : 0);
      carry = d == 16;
      d &= 15;
    }
    ascii[start + i] = "0123456789abcdef"[d];
  }
  if (carry) ascii[start - 1] = '0';  // the magnitude was zero
  OwnedValue str(ctx_, JS_NewStringLen(ctx_, ascii.data(), ascii.size()));
  if (str.isException()) return guestFailed();
  JSValueConst args[1] = {str.get()};
  OwnedValue v(ctx_, JS_Call(ctx_, in_.bigintCtor.get(), JS_UNDEFINED, 1, args));
  if (v.isException()) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return invalid("bad BigInt");
  }
  if (!hex || !negative) return v.release();
  JSValueConst wrap[2] = {JS_NewInt64(ctx_, static_cast<int64_t>(digits + 1) * 4), v.get()};
  JSValue r = JS_Call(ctx_, in_.bigintAsIntN.get(), JS_UNDEFINED, 2, wrap);
  if (JS_IsException(r)) return guestFailed();
  return r;
}

JSValue GuestDecoder::decodeValue(WireReader& in, uint32_t depth) {
  if (++nodes_ > limits_.maxNodes) {
    error_.status = CodecStatus::TooLarge;
    error_.message = "the value has too many parts";
    return JS_EXCEPTION;
  }
  if (depth > limits_.maxDepth) {
    error_.status = CodecStatus::TooLarge;
    error_.message = "the value is nested too deeply";
    return JS_EXCEPTION;
  }
  Tag tag;
  if (!in.tag(&tag)) return invalid("truncated");
  switch (tag) {
    case Tag::Undefined: return JS_UNDEFINED;
    case Tag::Null: return JS_NULL;
    case Tag::False: return JS_FALSE;
    case Tag::True: return JS_TRUE;
    case Tag::Int32: {
      int32_t i;
      if (!in.i32(&i)) return invalid("truncated int");
      return JS_NewInt32(ctx_, i);
    }
    case Tag::Float64: {
      double d;
      if (!in.f64(&d)) return invalid("truncated number");
      return JS_NewFloat64(ctx_, d);
    }
    case Tag::String:
    case Tag::Latin1: {
      std::u16string text;
      if (!readStringBody(in, tag, &text)) return invalid("bad string");
      JSValue v = JS_NewStringUTF16(ctx_, reinterpret_cast<const uint16_t*>(text.data()), text.size());
      return JS_IsException(v) ? guestFailed() : v;
    }
    case Tag::BigInt:
    case Tag::BigIntHex: return decodeBigInt(in, tag == Tag::BigIntHex);
    case Tag::Array: {
      uint32_t length, count;
      if (!in.u32(&length) || !in.u32(&count)) return invalid("truncated array");
      if (count > in.remaining()) return invalid("array count larger than data");
      OwnedValue arr(ctx_, remember(JS_NewArray(ctx_)));
      if (arr.isException()) return guestFailed();
      for (uint32_t i = 0; i < count; i++) {
        uint32_t index;
        if (!in.u32(&index)) return invalid("truncated array entry");
        if (index >= length) return invalid("array index out of range");
        JSValue item = decodeValue(in, depth + 1);
        if (JS_IsException(item)) return JS_EXCEPTION;
        if (JS_DefinePropertyValueUint32(ctx_, arr.get(), index, item, JS_PROP_C_W_E) < 0) return guestFailed();
      }
      if (JS_SetLength(ctx_, arr.get(), length) < 0) return guestFailed();
      return arr.release();
    }
    case Tag::Object: {
      uint8_t flags;
      uint32_t count;
      if (!in.u8(&flags) || !in.u32(&count)) return invalid("truncated object");
      if (count > in.remaining()) return invalid("object count larger than data");
      OwnedValue obj(ctx_, remember((flags & 1) ? JS_NewObjectProto(ctx_, JS_NULL) : JS_NewObject(ctx_)));
      if (obj.isException()) return guestFailed();
      for (uint32_t i = 0; i < count; i++) {
        OwnedValue key(ctx_, decodeString(in));
        if (key.isException()) return JS_EXCEPTION;
        OwnedAtom atom(ctx_, JS_ValueToAtom(ctx_, key.get()));
        if (atom.get() == JS_ATOM_NULL) return guestFailed();
        JSValue item = decodeValue(in, depth + 1);
        if (JS_IsException(item)) return JS_EXCEPTION;
        if (JS_DefinePropertyValue(ctx_, obj.get(), atom.get(), item, JS_PROP_C_W_E) < 0) return guestFailed();
      }
      return obj.release();
    }
    case Tag::Date: {
      double t;
      if (!in.f64(&t)) return invalid("truncated date");
      JSValue v = remember(JS_NewDate(ctx_, t));
      return JS_IsException(v) ? guestFailed() : v;
    }
    case Tag::RegExp: {
      OwnedValue source(ctx_, decodeString(in));
      if (source.isException()) return JS_EXCEPTION;
      OwnedValue flags(ctx_, decodeString(in));
      if (flags.isException()) return JS_EXCEPTION;
      JSValueConst args[2] = {source.get(), flags.get()};
      JSValue v = JS_CallConstructor(ctx_, in_.regexpCtor.get(), 2, args);
      if (JS_IsException(v)) {
        JS_FreeValue(ctx_, JS_GetException(ctx_));
        return invalid("bad RegExp");
      }
      return remember(v);
    }
    case Tag::Map:
    case Tag::Set: {
      bool isMap = tag == Tag::Map;
      uint32_t count;
      if (!in.u32(&count)) return invalid("truncated collection");
      if (count > in.remaining()) return invalid("collection count larger than data");
      OwnedValue coll(ctx_, JS_CallConstructor(ctx_, (isMap ? in_.mapCtor : in_.setCtor).get(), 0, nullptr));
      if (coll.isException()) return guestFailed();
      remember(coll.get());
      for (uint32_t i = 0; i < count; i++) {
        OwnedValue key(ctx_, decodeValue(in, depth + 1));
        if (key.isException()) return JS_EXCEPTION;
        if (isMap) {
          OwnedValue val(ctx_, decodeValue(in, depth + 1));
          if (val.isException()) return JS_EXCEPTION;
          JSValueConst args[2] = {key.get(), val.get()};
          OwnedValue r(ctx_, JS_Call(ctx_, in_.mapSet.get(), coll.get(), 2, args));
          if (r.isException()) return guestFailed();
        } else {
          JSValueConst args[1] = {key.get()};
          OwnedValue r(ctx_, JS_Call(ctx_, in_.setAdd.get(), coll.get(), 1, args));
          if (r.isException()) return guestFailed();
        }
      }
      return coll.release();
    }
    case Tag::ArrayBuffer: {
      uint32_t size;
      const uint8_t* data;
      if (!in.u32(&size) || !in.bytes(&data, size)) return invalid("truncated ArrayBuffer");
      JSValue v = remember(JS_NewArrayBufferCopy(ctx_, data, size));
      return JS_IsException(v) ? guestFailed() : v;
    }
    case Tag::TypedArray: {
      uint8_t kind;
      if (!in.u8(&kind) || kind >= static_cast<uint8_t>(TypedKind::Count)) return invalid("bad typed array kind");
      // The view is numbered before its buffer, as the encoder numbered it.
      size_t slot = objects_.size();
      objects_.push_back(JS_UNDEFINED);
      OwnedValue buffer(ctx_, decodeValue(in, depth + 1));
      if (buffer.isException()) return JS_EXCEPTION;
      if (!JS_IsArrayBuffer(buffer.get())) return invalid("typed array without a buffer");
      uint32_t offset, length;
      if (!in.u32(&offset) || !in.u32(&length)) return invalid("truncated typed array");
      size_t bufSize = 0;
      if (!JS_GetArrayBuffer(ctx_, &bufSize, buffer.get())) return guestFailed();
      uint64_t end = static_cast<uint64_t>(offset) +
                     static_cast<uint64_t>(length) * typedKindElementSize(static_cast<TypedKind>(kind));
      if (end > bufSize || offset % typedKindElementSize(static_cast<TypedKind>(kind)) != 0)
        return invalid("typed array outside its buffer");
      JSValue args[3] = {buffer.get(), JS_NewInt64(ctx_, offset), JS_NewInt64(ctx_, length)};
      JSValue v = static_cast<TypedKind>(kind) == TypedKind::DataView
                      ? JS_CallConstructor(ctx_, in_.dataViewCtor.get(), 3, args)
                      : JS_NewTypedArray(ctx_, 3, args, qjsTypeOf(static_cast<TypedKind>(kind)));
      if (JS_IsException(v)) return guestFailed();
      objects_[slot] = JS_DupValue(ctx_, v);
      return v;
    }
    case Tag::Error: {
      size_t slot = objects_.size();
      objects_.push_back(JS_UNDEFINED);
      OwnedValue name(ctx_, decodeString(in));
      if (name.isException()) return JS_EXCEPTION;
      OwnedValue message(ctx_, decodeString(in));
      if (message.isException()) return JS_EXCEPTION;
      OwnedValue stack(ctx_, decodeValue(in, depth + 1));
      if (stack.isException()) return JS_EXCEPTION;
      std::string nameText = utf8Of(ctx_, name.get());
      int ctor = 0;
      for (int i = 0; i < static_cast<int>(ErrorCtor::Count); i++)
        if (nameText == Intrinsics::kErrorNames[i]) ctor = i;
      JSValueConst args[1] = {message.get()};
      OwnedValue err(ctx_, JS_CallConstructor(ctx_, in_.errorCtors[ctor].get(), 1, args));
      if (err.isException()) return guestFailed();
      if (nameText != Intrinsics::kErrorNames[ctor] &&
          JS_DefinePropertyValueStr(ctx_, err.get(), "name", name.release(), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0)
        return guestFailed();
      if (JS_IsString(stack.get()) &&
          JS_DefinePropertyValueStr(ctx_, err.get(), "stack", stack.release(), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0)
        return guestFailed();
      objects_[slot] = JS_DupValue(ctx_, err.get());
      return err.release();
    }
    case Tag::BackRef: {
      uint32_t id;
      if (!in.u32(&id)) return invalid("truncated reference");
      if (id >= objects_.size() || JS_IsUndefined(objects_[id])) return invalid("reference to an unknown object");
      return JS_DupValue(ctx_, objects_[id]);
    }
    default: return invalid("unknown tag");
  }
}

}  // namespace qjsn
