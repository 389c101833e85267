#include "guest_codec.h"

namespace qjsn {

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

bool GuestEncoder::reserve(size_t n) { return out_.size() + n <= limits_.maxBytes || overCap(); }

bool GuestEncoder::overCap() {
  error_.overBytes = true;
  return fail(CodecStatus::TooLarge, "the value is larger than " + std::to_string(limits_.maxBytes) + " bytes");
}

bool GuestEncoder::put(Put result) {
  if (result == Put::Ok) return true;
  if (result == Put::Raised) return guestFailed();
  return overCap();
}

bool GuestEncoder::encodeString(JSValueConst s) { return put(writeString(ctx_, s, out_, limits_.maxBytes)); }

bool GuestEncoder::encodeValue(JSValueConst v, uint32_t depth) {
  if (++nodes_ > limits_.maxNodes)
    return fail(CodecStatus::TooLarge, "the value has more than " + std::to_string(limits_.maxNodes) + " parts");
  spendPart();
  if (!reserve(16)) return false;  // room for any scalar; strings and buffers reserve their size
  if (writeScalar(v, out_)) return true;
  switch (JS_VALUE_GET_NORM_TAG(v)) {
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
    return fail(CodecStatus::TooLarge,
                "the value is nested deeper than " + std::to_string(limits_.maxDepth) + " levels");
  if (JS_IsProxy(v)) return opaque(OpaqueKind::Proxy, "");
  if (JS_IsFunction(ctx_, v)) {
    OwnedValue name = dataProperty(v, "name", false);
    return opaqueNamed(OpaqueKind::Function, name.get());
  }
  if (JS_IsPromise(v)) return opaque(OpaqueKind::Promise, "");
  if (JS_IsWeakMap(v) || JS_IsWeakSet(v) || JS_IsWeakRef(v)) return opaque(OpaqueKind::WeakCollection, "");

  ids_.emplace(ptr, nextId_++);
  // A container a copy for display writes without entries (nested too deep to be shown) keeps its
  // number, but is not remembered: a later reference, met higher up, writes it in full.
  if (depth > displayDepth_) ids_.erase(ptr);
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
  TypedKind typed = typedKindOf(JS_GetTypedArrayType(v));
  if (typed != TypedKind::Count) return encodeView(v, typed);
  if (JS_IsDataView(v)) return encodeView(v, TypedKind::DataView);
  if (JS_GetClassID(v) != in_.objectClassId) {
    ids_.erase(ptr);
    nextId_--;
    return opaque(OpaqueKind::Other, "");
  }
  return encodePlain(v, depth);
}

bool GuestEncoder::walked(Walk result) {
  if (result == Walk::Done) return true;
  return result == Walk::Raised ? guestFailed() : false;
}

bool GuestEncoder::encodeArray(JSValueConst v, uint32_t depth) {
  return walked(walkArray(ctx_, v, out_, [&](uint32_t index, const OwnedDescriptor& d) {
    if (cutsAt(depth)) return Step::Cut;
    if (d.isAccessor() ? opaque(OpaqueKind::Accessor, "") : encodeValue(d.desc.value, depth + 1)) return Step::Continue;
    prependPath("[" + std::to_string(index) + "]");
    return Step::Stop;
  }));
}

// Longest class name written; a longer one is left out (the object copies as a plain one).
constexpr int32_t kMaxClassNameUnits = 256;

OwnedValue GuestEncoder::className(JSValueConst proto) {
  OwnedValue none(ctx_, JS_UNDEFINED);
  if (!JS_IsObject(proto) || JS_VALUE_GET_PTR(proto) == JS_VALUE_GET_PTR(in_.objectProto.get())) return none;
  // The first own `constructor` up the chain, read by descriptor: no getter or Proxy trap runs.
  OwnedAtom atom(ctx_, JS_NewAtom(ctx_, "constructor"));
  OwnedValue cur = OwnedValue::dup(ctx_, proto);
  for (int hops = 0; hops < 64 && JS_IsObject(cur.get()) && !JS_IsProxy(cur.get()); hops++) {
    OwnedDescriptor d(ctx_);
    int r = d.load(cur.get(), atom.get());
    if (r < 0) JS_FreeValue(ctx_, JS_GetException(ctx_));
    if (r < 0 || (r == 1 && (d.isAccessor() || !JS_IsFunction(ctx_, d.desc.value)))) return none;
    if (r == 1) {
      OwnedValue name = dataProperty(d.desc.value, "name", false);
      if (!JS_IsString(name.get())) return none;
      // A string's length is read without copying it (and runs no guest code).
      OwnedValue length(ctx_, JS_GetPropertyStr(ctx_, name.get(), "length"));
      int32_t units = JS_VALUE_GET_TAG(length.get()) == JS_TAG_INT ? JS_VALUE_GET_INT(length.get()) : 0;
      if (units == 0 || units > kMaxClassNameUnits) return none;
      GuestUtf16 text(ctx_, name.get());
      static const uint16_t kObject[] = {'O', 'b', 'j', 'e', 'c', 't'};
      if (!text.ok() || (text.size() == 6 && std::memcmp(text.data(), kObject, sizeof kObject) == 0)) {
        if (!text.ok()) JS_FreeValue(ctx_, JS_GetException(ctx_));
        return none;
      }
      return name;
    }
    cur = OwnedValue(ctx_, JS_GetPrototype(ctx_, cur.get()));
  }
  return none;
}

bool GuestEncoder::encodePlain(JSValueConst v, uint32_t depth) {
  OwnedValue proto(ctx_, JS_GetPrototype(ctx_, v));
  OwnedValue name = className(proto.get());
  bool named = JS_IsString(name.get());
  out_.tag(Tag::Object);
  out_.u8((JS_IsNull(proto.get()) ? 1 : 0) | (named ? 2 : 0));
  if (named && !encodeString(name.get())) return false;
  return walked(walkProperties(ctx_, v, out_, [&](JSAtom key, const OwnedDescriptor& d) {
    if (cutsAt(depth)) return Step::Cut;
    spendPart();
    if (!put(writeAtomKey(ctx_, key, out_, limits_.maxBytes))) return Step::Stop;
    if (d.isAccessor() ? opaque(OpaqueKind::Accessor, "") : encodeValue(d.desc.value, depth + 1)) return Step::Continue;
    prependPath("." + atomText(ctx_, key));
    return Step::Stop;
  }));
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

bool GuestEncoder::encodeCollection(JSValueConst v, bool isMap, uint32_t depth) {
  Walk result = walkCollection(ctx_, in_, v, isMap, out_, [&](JSValueConst value, JSValueConst key) {
    if (cutsAt(depth)) return Step::Cut;
    bool ok = (!isMap || encodeValue(key, depth + 1)) && encodeValue(value, depth + 1);
    return ok ? Step::Continue : Step::Stop;
  });
  if (result == Walk::Done) return true;
  if (result == Walk::Raised) error_.status = CodecStatus::GuestException;
  if (error_.message.empty()) error_.message = "the engine raised while copying";
  prependPath(isMap ? ".<map entry>" : ".<set entry>");
  return false;
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
    if (off.isException() || len.isException() || JS_ToInt64(ctx_, &o, off.get()) < 0 ||
        JS_ToInt64(ctx_, &l, len.get()) < 0) {
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

JSValue GuestDecoder::decode(WireReader& in) {
  JSValue v = readChild(in, 0);
  if (!JS_IsException(v) && !in.atEnd()) {
    JS_FreeValue(ctx_, v);
    return invalid("trailing bytes");
  }
  return v;
}

JSValue GuestDecoder::readChild(WireReader& in, uint32_t depth) {
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
  if (tag != Tag::Object) return readShared(in, tag, depth);
  uint8_t flags;
  uint32_t count;
  if (!in.u8(&flags) || !in.u32(&count)) return invalid("truncated object");
  if (count > in.remaining()) return invalid("object count larger than data");
  OwnedValue obj(ctx_, remember((flags & 1) ? JS_NewObjectProto(ctx_, JS_NULL) : JS_NewObject(ctx_)));
  if (obj.isException()) return guestFailed();
  for (uint32_t i = 0; i < count; i++) {
    OwnedValue key(ctx_, readStringValue(in));
    if (key.isException()) return JS_EXCEPTION;
    OwnedAtom atom(ctx_, JS_ValueToAtom(ctx_, key.get()));
    if (atom.get() == JS_ATOM_NULL) return guestFailed();
    JSValue item = readChild(in, depth + 1);
    if (JS_IsException(item)) return JS_EXCEPTION;
    if (JS_DefinePropertyValue(ctx_, obj.get(), atom.get(), item, JS_PROP_C_W_E) < 0) return guestFailed();
  }
  return obj.release();
}

}  // namespace qjsn
