#include "value_walk.h"

#include <cstdio>

namespace qjsn {

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

std::string utf8Of(JSContext* ctx, const std::u16string& s) {
  OwnedValue v(ctx, JS_NewStringUTF16(ctx, reinterpret_cast<const uint16_t*>(s.data()), s.size()));
  return v.isException() ? std::string() : utf8Of(ctx, v.get());
}

std::string atomText(JSContext* ctx, JSAtom atom) {
  OwnedValue v(ctx, JS_AtomToValue(ctx, atom));
  return utf8Of(ctx, v.get());
}

namespace {

// One table for both directions between the engine's typed array enum and the wire's.
constexpr struct {
  JSTypedArrayEnum qjs;
  TypedKind wire;
} kTypedKinds[] = {
    {JS_TYPED_ARRAY_INT8, TypedKind::Int8},
    {JS_TYPED_ARRAY_UINT8, TypedKind::Uint8},
    {JS_TYPED_ARRAY_UINT8C, TypedKind::Uint8Clamped},
    {JS_TYPED_ARRAY_INT16, TypedKind::Int16},
    {JS_TYPED_ARRAY_UINT16, TypedKind::Uint16},
    {JS_TYPED_ARRAY_INT32, TypedKind::Int32},
    {JS_TYPED_ARRAY_UINT32, TypedKind::Uint32},
    {JS_TYPED_ARRAY_FLOAT32, TypedKind::Float32},
    {JS_TYPED_ARRAY_FLOAT64, TypedKind::Float64},
    {JS_TYPED_ARRAY_BIG_INT64, TypedKind::BigInt64},
    {JS_TYPED_ARRAY_BIG_UINT64, TypedKind::BigUint64},
    {JS_TYPED_ARRAY_FLOAT16, TypedKind::Float16},
};

// Parses an array index ("0".."4294967294") from a key's UTF-16 text.
bool parseIndex(const uint16_t* s, size_t n, uint32_t* out) {
  if (n == 0 || n > 10 || (n > 1 && s[0] == u'0')) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < u'0' || s[i] > u'9') return false;
    v = v * 10 + (s[i] - u'0');
  }
  if (v >= 0xFFFFFFFFull) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

TypedKind typedKindOf(int qjsType) {
  for (const auto& k : kTypedKinds)
    if (k.qjs == qjsType) return k.wire;
  return TypedKind::Count;
}

JSTypedArrayEnum qjsTypeOf(TypedKind kind) {
  for (const auto& k : kTypedKinds)
    if (k.wire == kind) return k.qjs;
  return JS_TYPED_ARRAY_UINT8;
}

bool writeScalar(JSValueConst v, WireWriter& out) {
  switch (JS_VALUE_GET_NORM_TAG(v)) {
    case JS_TAG_UNDEFINED: out.tag(Tag::Undefined); return true;
    case JS_TAG_NULL: out.tag(Tag::Null); return true;
    case JS_TAG_BOOL: out.tag(JS_VALUE_GET_BOOL(v) ? Tag::True : Tag::False); return true;
    case JS_TAG_INT:
      out.tag(Tag::Int32);
      out.i32(JS_VALUE_GET_INT(v));
      return true;
    case JS_TAG_FLOAT64:
      out.tag(Tag::Float64);
      out.f64(JS_VALUE_GET_FLOAT64(v));
      return true;
    default: return false;
  }
}

Put writeString(JSContext* ctx, JSValueConst s, WireWriter& out, uint64_t maxBytes) {
  GuestUtf16 u(ctx, s);
  if (!u.ok()) return Put::Raised;
  bool narrow = WireWriter::narrow(u.data(), u.size());
  if (out.size() + WireWriter::stringSize(u.size(), narrow) > maxBytes) return Put::OverCap;
  out.string(u.data(), u.size(), narrow);
  return Put::Ok;
}

Put writeAtomKey(JSContext* ctx, JSAtom atom, WireWriter& out, uint64_t maxBytes) {
  OwnedValue key(ctx, JS_AtomToValue(ctx, atom));
  if (key.isException()) return Put::Raised;
  if (JS_VALUE_GET_TAG(key.get()) == JS_TAG_INT) {
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%d", JS_VALUE_GET_INT(key.get()));
    out.latin1(buf, static_cast<size_t>(n));
    return Put::Ok;
  }
  return writeString(ctx, key.get(), out, maxBytes);
}

int arrayIndexOf(JSContext* ctx, JSAtom atom, uint32_t* index) {
  OwnedValue key(ctx, JS_AtomToValue(ctx, atom));
  if (JS_VALUE_GET_TAG(key.get()) == JS_TAG_INT) {
    *index = static_cast<uint32_t>(JS_VALUE_GET_INT(key.get()));
    return 1;
  }
  // Indices above 2^31-1 are string atoms.
  GuestUtf16 u(ctx, key.get());
  if (!u.ok()) return -1;
  return parseIndex(u.data(), u.size(), index) ? 1 : 0;
}

namespace {

struct CollectionWalk {
  EntryFn entry;
  void* data;
  uint32_t count = 0;
  bool stopped = false;  // the pending exception is the walk's stop signal, not the engine's
  bool cut = false;      // ... because the callback cut the collection short
};

JSValue collectionStep(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int, void* opaque) {
  auto* walk = static_cast<CollectionWalk*>(opaque);
  JSValueConst value = argc > 0 ? argv[0] : JS_UNDEFINED;
  JSValueConst key = argc > 1 ? argv[1] : JS_UNDEFINED;
  Step step = walk->entry(walk->data, value, key);
  if (step == Step::Continue) {
    walk->count++;
    return JS_UNDEFINED;
  }
  if (step == Step::Propagate && JS_HasException(ctx)) return JS_EXCEPTION;
  walk->stopped = true;
  walk->cut = step == Step::Cut;
  return JS_ThrowInternalError(ctx, "walk stopped");
}

}  // namespace

Walk walkCollectionWith(JSContext* ctx, const Intrinsics& in, JSValueConst coll, bool isMap, WireWriter& out,
                        EntryFn entry, void* data) {
  out.tag(isMap ? Tag::Map : Tag::Set);
  size_t countAt = out.size();
  out.u32(0);
  CollectionWalk walk{entry, data};
  OwnedValue callback(ctx, JS_NewCClosure(ctx, collectionStep, "", nullptr, 2, 0, &walk));
  if (callback.isException()) return Walk::Raised;
  JSValueConst args[1] = {callback.get()};
  OwnedValue done(ctx, JS_Call(ctx, (isMap ? in.mapForEach : in.setForEach).get(), coll, 1, args));
  if (done.isException()) {
    if (!walk.stopped) return Walk::Raised;
    JS_FreeValue(ctx, JS_GetException(ctx));
    if (!walk.cut) return Walk::Stopped;
    // The size from the captured getter: the guest can replace `size` on the prototype.
    OwnedValue size(ctx, JS_Call(ctx, in.sizeGetters[isMap ? 0 : 1].get(), coll, 0, nullptr));
    uint32_t total = 0;
    if (size.isException() || JS_ToUint32(ctx, &total, size.get()) < 0) return Walk::Raised;
    out.tag(Tag::More);
    out.u32(total);
    walk.count++;
  }
  out.patchU32(countAt, walk.count);
  return Walk::Done;
}

// ---------------------------------------------------------------------------------------------
// ValueBuilder

ValueBuilder::~ValueBuilder() {
  for (JSValue v : objects_) JS_FreeValue(ctx_, v);
}

JSValue ValueBuilder::remember(JSValue v) {
  if (!JS_IsException(v)) objects_.push_back(JS_DupValue(ctx_, v));
  return v;
}

JSValue ValueBuilder::readStringValue(WireReader& in) {
  std::u16string s;
  if (!readString(in, &s)) return invalid("bad string");
  JSValue v = JS_NewStringUTF16(ctx_, reinterpret_cast<const uint16_t*>(s.data()), s.size());
  return JS_IsException(v) ? guestFailed() : v;
}

bool ValueBuilder::readElement(WireReader& in, JSValueConst array, uint32_t index, uint32_t depth) {
  JSValue item = readChild(in, depth);
  if (JS_IsException(item)) return false;
  if (JS_DefinePropertyValueUint32(ctx_, array, index, item, JS_PROP_C_W_E) >= 0) return true;
  guestFailed();
  return false;
}

JSValue ValueBuilder::readShared(WireReader& in, Tag tag, uint32_t depth) {
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
    case Tag::BigIntHex: return readBigInt(in, tag == Tag::BigIntHex);
    case Tag::Array: return readArray(in, depth);
    case Tag::Date: {
      double t;
      if (!in.f64(&t)) return invalid("truncated date");
      JSValue v = remember(JS_NewDate(ctx_, t));
      return JS_IsException(v) ? guestFailed() : v;
    }
    case Tag::RegExp: {
      OwnedValue source(ctx_, readStringValue(in));
      if (source.isException()) return JS_EXCEPTION;
      OwnedValue flags(ctx_, readStringValue(in));
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
    case Tag::Set: return readCollection(in, tag == Tag::Map, depth);
    case Tag::ArrayBuffer: {
      uint32_t size;
      const uint8_t* data;
      if (!in.u32(&size) || !in.bytes(&data, size)) return invalid("truncated ArrayBuffer");
      JSValue v = remember(JS_NewArrayBufferCopy(ctx_, data, size));
      return JS_IsException(v) ? guestFailed() : v;
    }
    case Tag::TypedArray: return readView(in, depth);
    case Tag::Error: return readError(in, depth);
    case Tag::BackRef: {
      uint32_t id;
      if (!in.u32(&id)) return invalid("truncated reference");
      if (id >= objects_.size() || JS_IsUndefined(objects_[id])) return invalid("reference to an unknown object");
      if (JS_IsNull(objects_[id])) return lostObject();
      return JS_DupValue(ctx_, objects_[id]);
    }
    default: return invalid("unknown tag");
  }
}

// Hex text goes through BigInt("0x...") and BigInt.asIntN, both linear. A negative value is
// read as the two's complement of its magnitude one digit wider, so no arithmetic is needed.
JSValue ValueBuilder::readBigInt(WireReader& in, bool hex) {
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

JSValue ValueBuilder::readArray(WireReader& in, uint32_t depth) {
  uint32_t length, count;
  if (!in.u32(&length) || !in.u32(&count)) return invalid("truncated array");
  if (count > in.remaining()) return invalid("array count larger than data");
  OwnedValue arr(ctx_, remember(JS_NewArray(ctx_)));
  if (arr.isException()) return guestFailed();
  for (uint32_t i = 0; i < count; i++) {
    uint32_t index;
    if (!in.u32(&index)) return invalid("truncated array entry");
    if (index >= length) return invalid("array index out of range");
    if (!readElement(in, arr.get(), index, depth + 1)) return JS_EXCEPTION;
  }
  if (JS_SetLength(ctx_, arr.get(), length) < 0) return guestFailed();
  return arr.release();
}

JSValue ValueBuilder::readCollection(WireReader& in, bool isMap, uint32_t depth) {
  uint32_t count;
  if (!in.u32(&count)) return invalid("truncated collection");
  if (count > in.remaining()) return invalid("collection count larger than data");
  OwnedValue coll(ctx_, JS_CallConstructor(ctx_, (isMap ? in_.mapCtor : in_.setCtor).get(), 0, nullptr));
  if (coll.isException()) return guestFailed();
  remember(coll.get());
  for (uint32_t i = 0; i < count; i++) {
    OwnedValue key(ctx_, readChild(in, depth + 1));
    if (key.isException()) return JS_EXCEPTION;
    OwnedValue val(ctx_, isMap ? readChild(in, depth + 1) : JS_UNDEFINED);
    if (val.isException()) return JS_EXCEPTION;
    JSValueConst args[2] = {key.get(), val.get()};
    OwnedValue r(ctx_, JS_Call(ctx_, (isMap ? in_.mapSet : in_.setAdd).get(), coll.get(), isMap ? 2 : 1, args));
    if (r.isException()) return guestFailed();
  }
  return coll.release();
}

JSValue ValueBuilder::readView(WireReader& in, uint32_t depth) {
  uint8_t kind;
  if (!in.u8(&kind) || kind >= static_cast<uint8_t>(TypedKind::Count)) return invalid("bad typed array kind");
  // The view is numbered before its buffer, as the writers number it.
  size_t slot = objects_.size();
  objects_.push_back(JS_UNDEFINED);
  OwnedValue buffer(ctx_, readChild(in, depth + 1));
  if (buffer.isException()) return JS_EXCEPTION;
  if (!JS_IsArrayBuffer(buffer.get())) return invalid("typed array without a buffer");
  uint32_t offset, length;
  if (!in.u32(&offset) || !in.u32(&length)) return invalid("truncated typed array");
  size_t bufSize = 0;
  if (!JS_GetArrayBuffer(ctx_, &bufSize, buffer.get())) return guestFailed();
  uint32_t elementSize = typedKindElementSize(static_cast<TypedKind>(kind));
  uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) * elementSize;
  if (end > bufSize || offset % elementSize != 0) return invalid("typed array outside its buffer");
  JSValue args[3] = {buffer.get(), JS_NewInt64(ctx_, offset), JS_NewInt64(ctx_, length)};
  JSValue v = static_cast<TypedKind>(kind) == TypedKind::DataView
                  ? JS_CallConstructor(ctx_, in_.dataViewCtor.get(), 3, args)
                  : JS_NewTypedArray(ctx_, 3, args, qjsTypeOf(static_cast<TypedKind>(kind)));
  if (JS_IsException(v)) return guestFailed();
  objects_[slot] = JS_DupValue(ctx_, v);
  return v;
}

JSValue ValueBuilder::readError(WireReader& in, uint32_t depth) {
  size_t slot = objects_.size();
  objects_.push_back(JS_UNDEFINED);
  OwnedValue name(ctx_, readStringValue(in));
  if (name.isException()) return JS_EXCEPTION;
  OwnedValue message(ctx_, readStringValue(in));
  if (message.isException()) return JS_EXCEPTION;
  OwnedValue stack(ctx_, readChild(in, depth + 1));
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

}  // namespace qjsn
