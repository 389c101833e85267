#include "snapshot.h"

#include <cstdio>
#include <algorithm>
#include <memory>
#include <mutex>
#include <cstring>
#include <deque>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "engine.h"
#include "guest_codec.h"

namespace qjsn {

std::string notRestoredMessage(const std::string& name, const std::string& type) {
  return "Value for '" + name + "' was not restored because it is not serializable (type: " + type + ").";
}

namespace {

// A placeholder's getter is an object of its own callable class whose opaque says what was lost:
// a later snapshot recognises it (guest code cannot forge the class or read the opaque) and
// writes the placeholder back with its first type, marked as already reported.
struct PlaceholderInfo {
  std::string name, type;
};

JSClassID placeholderClassId = 0;
std::once_flag placeholderClassIdOnce;

void placeholderFinalizer(JSRuntime*, JSValueConst v) {
  delete static_cast<PlaceholderInfo*>(JS_GetOpaque(v, placeholderClassId));
}

JSValue placeholderGetter(JSContext* ctx, JSValueConst self, JSValueConst, int, JSValueConst*, int) {
  const auto* info = static_cast<const PlaceholderInfo*>(JS_GetOpaque(self, placeholderClassId));
  std::string text = info ? notRestoredMessage(info->name, info->type) : std::string("Value was not restored.");
  return JS_ThrowReferenceError(ctx, "%s", text.c_str());
}

const JSClassDef kPlaceholderClass = {"NotRestored", placeholderFinalizer, nullptr, placeholderGetter, nullptr};

// What a placeholder getter stands for; null for any other value.
const PlaceholderInfo* placeholderInfoOf(JSValueConst getter) {
  if (placeholderClassId == 0 || JS_GetClassID(getter) != placeholderClassId) return nullptr;
  return static_cast<const PlaceholderInfo*>(JS_GetOpaque(getter, placeholderClassId));
}

// One table for both directions between the engine's typed array enum and the wire's.
constexpr struct {
  JSTypedArrayEnum qjs;
  TypedKind wire;
} kTypedKinds[] = {
    {JS_TYPED_ARRAY_INT8, TypedKind::Int8},         {JS_TYPED_ARRAY_UINT8, TypedKind::Uint8},
    {JS_TYPED_ARRAY_UINT8C, TypedKind::Uint8Clamped}, {JS_TYPED_ARRAY_INT16, TypedKind::Int16},
    {JS_TYPED_ARRAY_UINT16, TypedKind::Uint16},     {JS_TYPED_ARRAY_INT32, TypedKind::Int32},
    {JS_TYPED_ARRAY_UINT32, TypedKind::Uint32},     {JS_TYPED_ARRAY_FLOAT32, TypedKind::Float32},
    {JS_TYPED_ARRAY_FLOAT64, TypedKind::Float64},   {JS_TYPED_ARRAY_BIG_INT64, TypedKind::BigInt64},
    {JS_TYPED_ARRAY_BIG_UINT64, TypedKind::BigUint64}, {JS_TYPED_ARRAY_FLOAT16, TypedKind::Float16},
};

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

std::string atomText(JSContext* ctx, JSAtom atom) {
  OwnedValue v(ctx, JS_AtomToValue(ctx, atom));
  return utf8Of(ctx, v.get());
}

std::string utf8Of(JSContext* ctx, const std::u16string& s) {
  OwnedValue v(ctx, JS_NewStringUTF16(ctx, reinterpret_cast<const uint16_t*>(s.data()), s.size()));
  return v.isException() ? std::string() : utf8Of(ctx, v.get());
}

// The own data property `name` of `obj`, or undefined (getters are never run).
OwnedValue ownData(JSContext* ctx, JSValueConst obj, JSAtom name) {
  OwnedDescriptor d(ctx);
  int r = d.load(obj, name);
  if (r < 0) JS_FreeValue(ctx, JS_GetException(ctx));
  if (r != 1 || d.isAccessor()) return OwnedValue(ctx, JS_UNDEFINED);
  return OwnedValue::dup(ctx, d.desc.value);
}

bool isClassSource(const char* s, size_t n) {
  size_t i = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  if (n - i < 6 || std::memcmp(s + i, "class", 5) != 0) return false;
  char c = s[i + 5];
  return !(c == '_' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

// True when re-creating `fn` from its source in the global scope would lose a variable it
// captured from an enclosing function. A class's own name, its private names and its internal
// bindings (field initializers, brand) come back with the class source; the field initializer
// is itself checked.
bool capturesLocals(JSContext* ctx, JSValueConst fn, const std::string& selfName, int depth) {
  JSFunctionSnapshotInfo info;
  if (!JS_GetFunctionSnapshotInfo(ctx, fn, &info)) return false;
  for (int i = 0; i < info.closure_var_count; i++) {
    JSAtom atom;
    JSValue value;
    if (!JS_GetClosureVar(ctx, fn, i, &atom, &value)) return true;
    OwnedAtom name(ctx, atom);
    OwnedValue held(ctx, value);
    std::string text = atomText(ctx, name.get());
    if (!text.empty() && text[0] == '#') continue;
    if (!text.empty() && text[0] == '<') {
      if (JS_IsFunction(ctx, held.get()) && (depth >= 8 || capturesLocals(ctx, held.get(), selfName, depth + 1)))
        return true;
      continue;
    }
    if (!selfName.empty() && text == selfName) continue;
    return true;
  }
  return false;
}

// The methods and accessors of a class (static and on its prototype) must not capture either.
bool membersCaptureLocals(JSContext* ctx, JSValueConst obj, const std::string& selfName) {
  OwnedPropertyEnum keys(ctx);
  if (!keys.load(obj, JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK)) {
    JS_FreeValue(ctx, JS_GetException(ctx));
    return true;
  }
  for (uint32_t i = 0; i < keys.size(); i++) {
    OwnedDescriptor d(ctx);
    if (d.load(obj, keys.atom(i)) != 1) continue;
    for (JSValueConst f : {d.desc.value, d.desc.getter, d.desc.setter})
      if (JS_IsFunction(ctx, f) && capturesLocals(ctx, f, selfName, 0)) return true;
  }
  return false;
}

// Takes the pending exception after the engine raised: a stack overflow (deep nesting) is a
// size problem, anything else is out of memory.
void takeEngineFailure(JSContext* ctx, SnapshotResult* result) {
  OwnedValue exc(ctx, JS_GetException(ctx));
  if (result->status != SnapshotStatus::OutOfMemory || !JS_IsError(exc.get())) return;
  OwnedAtom messageAtom(ctx, JS_NewAtom(ctx, "message"));
  OwnedValue message = ownData(ctx, exc.get(), messageAtom.get());  // never a getter: guest code may have thrown it
  if (JS_IsString(message.get()) && utf8Of(ctx, message.get()).find("stack") != std::string::npos) {
    result->status = SnapshotStatus::TooLarge;
    result->message = "the state is nested too deeply for the sandbox's stack (maxStackSizeBytes)";
  }
}

enum class W { Ok, Unstorable, Fatal };

class Writer {
 public:
  Writer(JSContext* ctx, const Intrinsics& in, const WireLimits& limits, WireWriter& out)
      : ctx_(ctx), in_(in), limits_(limits), out_(out),
        atomConstructor_(ctx, JS_NewAtom(ctx, "constructor")),
        atomPrototype_(ctx, JS_NewAtom(ctx, "prototype")),
        atomName_(ctx, JS_NewAtom(ctx, "name")) {
    OwnedValue plain(ctx, JS_NewObject(ctx));
    objectProto_ = OwnedValue(ctx, JS_GetPrototype(ctx, plain.get()));
  }

  ~Writer() {
    for (auto& [atom, bytes] : keys_) JS_FreeAtom(ctx_, atom);
  }

  SnapshotResult run(const std::unordered_set<std::u16string>& baseline, const std::unordered_set<std::u16string>& exclude);

 private:
  struct Entry {
    Binding binding;
    uint8_t flags;
    JSAtom atom;  // borrowed from the enumeration that produced it
    OwnedValue value, getter, setter;
    bool accessor;
  };
  // One step of the path to the value being written, for placeholder names.
  struct Segment {
    JSAtom atom;  // borrowed; JS_ATOM_NULL for an index
    uint32_t index;
  };

  bool collect(JSValueConst holder, Binding defaultBinding, const std::unordered_set<std::u16string>& baseline,
               const std::unordered_set<std::u16string>& exclude, OwnedPropertyEnum& keys, std::vector<Entry>* entries);
  W value(JSValueConst v, uint32_t depth);
  W object(JSValueConst v, uint32_t depth);
  W function(JSValueConst v, uint32_t depth);
  W array(JSValueConst v, uint32_t depth);
  W properties(JSValueConst obj, uint32_t depth);
  // Where the output stood, to take back a value that turned out not to be storable.
  struct Mark {
    size_t bytes, objects, report;
  };
  Mark mark() const { return {out_.size(), numbered_.size(), result_.notRestored.size()}; }
  void rollback(const Mark& m);
  W slot(JSValueConst v, uint32_t depth);
  W accessor(JSValueConst getter, JSValueConst setter, uint32_t depth);
  W collection(JSValueConst v, bool isMap, uint32_t depth);
  W typedArray(JSValueConst v, int type, uint32_t depth);
  W leaf(JSValueConst v);
  bool prototypeOwner(JSValueConst v, OwnedValue* owner);
  void placeholder(const std::string& type, Tag tag = Tag::Placeholder);
  bool string(JSValueConst s);
  bool atomKey(JSAtom atom);
  void number(JSValueConst v) {
    ids_.emplace(JS_VALUE_GET_PTR(v), static_cast<uint32_t>(numbered_.size()));
    numbered_.push_back(JS_VALUE_GET_PTR(v));
  }
  W unstorable(std::string type) {
    type_ = std::move(type);
    return W::Unstorable;
  }
  W fatal(SnapshotStatus status, std::string message) {
    result_.status = status;
    result_.message = std::move(message);
    return W::Fatal;
  }
  W guestFailed() { return fatal(SnapshotStatus::OutOfMemory, "the engine raised while writing the snapshot"); }
  std::string pathText();
  friend JSValue collectionEntry(JSContext*, JSValueConst, int, JSValueConst*, int, void*);

  JSContext* ctx_;
  const Intrinsics& in_;
  const WireLimits& limits_;
  WireWriter& out_;
  OwnedAtom atomConstructor_, atomPrototype_, atomName_;
  OwnedValue objectProto_;
  std::unordered_map<void*, uint32_t> ids_;
  std::vector<void*> numbered_;
  std::vector<Segment> path_;
  std::unordered_map<JSAtom, std::string> keys_;  // atom (counted) -> its wire bytes
  uint32_t nodes_ = 0;
  std::string type_;  // why the last Unstorable value cannot be stored
  SnapshotResult result_;
  // Set while a Map/Set is walked through its built-in forEach.
  bool collectionIsMap_ = false;
  uint32_t collectionDepth_ = 0, collectionCount_ = 0;
  W collectionStatus_ = W::Ok;
  bool ownStop_ = false;  // the pending exception is our stop signal, not the engine's
};

std::string Writer::pathText() {
  std::string text;
  for (size_t i = 0; i < path_.size(); i++) {
    const Segment& s = path_[i];
    if (s.atom == JS_ATOM_NULL) {
      text += "[" + std::to_string(s.index) + "]";
    } else {
      if (i > 0) text += ".";
      text += atomText(ctx_, s.atom);
    }
  }
  return text;
}

bool Writer::string(JSValueConst s) {
  GuestUtf16 u(ctx_, s);
  if (!u.ok()) return false;
  out_.string(u.data(), u.size());
  return true;
}

// Property names repeat across records of one shape: each is converted once per snapshot.
bool Writer::atomKey(JSAtom atom) {
  auto cached = keys_.find(atom);
  if (cached != keys_.end()) {
    out_.raw(cached->second.data(), cached->second.size());
    return true;
  }
  size_t start = out_.size();
  OwnedValue key(ctx_, JS_AtomToValue(ctx_, atom));
  if (key.isException()) return false;
  if (JS_VALUE_GET_TAG(key.get()) == JS_TAG_INT) {
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%d", JS_VALUE_GET_INT(key.get()));
    out_.latin1(buf, static_cast<size_t>(n));
  } else if (!string(key.get())) {
    return false;
  }
  keys_.emplace(JS_DupAtom(ctx_, atom), std::string(reinterpret_cast<const char*>(out_.bytes().data() + start), out_.size() - start));
  return true;
}

void Writer::placeholder(const std::string& type, Tag tag) {
  std::string name = pathText();
  out_.tag(tag);
  out_.latin1(type);
  OwnedValue text(ctx_, JS_NewStringLen(ctx_, name.data(), name.size()));
  if (text.isException() || !string(text.get())) out_.latin1(name);
  result_.notRestored.push_back({name, type});
}

// A value in a place that can hold a placeholder (a property, an element, a global): when it
// cannot be stored, what was written of it is taken back and a placeholder takes its place.
W Writer::slot(JSValueConst v, uint32_t depth) {
  Mark m = mark();
  W r = value(v, depth);
  if (r != W::Unstorable) return r;
  rollback(m);
  placeholder(type_);
  return W::Ok;
}

void Writer::rollback(const Mark& m) {
  out_.bytes().resize(m.bytes);
  while (numbered_.size() > m.objects) {
    ids_.erase(numbered_.back());
    numbered_.pop_back();
  }
  result_.notRestored.resize(m.report);
}

// An accessor property: its getter and setter, re-created from source like any function. When
// either cannot be, the property is a placeholder.
W Writer::accessor(JSValueConst getter, JSValueConst setter, uint32_t depth) {
  if (const PlaceholderInfo* carried = placeholderInfoOf(getter)) {
    placeholder(carried->type, Tag::ReportedPlaceholder);
    return W::Ok;
  }
  Mark m = mark();
  out_.tag(Tag::Accessor);
  W r = W::Ok;
  for (JSValueConst f : {getter, setter}) {
    if (r != W::Ok) break;
    if (JS_IsUndefined(f)) out_.tag(Tag::Undefined);
    else r = JS_IsFunction(ctx_, f) ? value(f, depth) : unstorable("accessor");
  }
  if (r != W::Unstorable) return r;
  rollback(m);
  placeholder(type_ == "accessor" ? type_ : "accessor (" + type_ + ")");
  return W::Ok;
}

W Writer::value(JSValueConst v, uint32_t depth) {
  if (++nodes_ > limits_.maxNodes)
    return fatal(SnapshotStatus::TooLarge, "the state has more than " + std::to_string(limits_.maxNodes) + " values");
  if (out_.size() > limits_.maxBytes)
    return fatal(SnapshotStatus::TooLarge, "the state takes more than " + std::to_string(limits_.maxBytes) + " bytes");
  switch (JS_VALUE_GET_NORM_TAG(v)) {
    case JS_TAG_UNDEFINED: out_.tag(Tag::Undefined); return W::Ok;
    case JS_TAG_NULL: out_.tag(Tag::Null); return W::Ok;
    case JS_TAG_BOOL: out_.tag(JS_VALUE_GET_BOOL(v) ? Tag::True : Tag::False); return W::Ok;
    case JS_TAG_INT: out_.tag(Tag::Int32); out_.i32(JS_VALUE_GET_INT(v)); return W::Ok;
    case JS_TAG_FLOAT64: out_.tag(Tag::Float64); out_.f64(JS_VALUE_GET_FLOAT64(v)); return W::Ok;
    case JS_TAG_STRING:
    case JS_TAG_STRING_ROPE: return string(v) ? W::Ok : guestFailed();
    case JS_TAG_BIG_INT:
    case JS_TAG_SHORT_BIG_INT: return leaf(v);
    case JS_TAG_SYMBOL: return unstorable("symbol");
    case JS_TAG_OBJECT: return object(v, depth);
    default: return unstorable("unknown");
  }
}

// Date, RegExp, Error, ArrayBuffer and BigInt hold no other objects: the boundary codec writes them.
W Writer::leaf(JSValueConst v) {
  GuestEncoder enc(ctx_, in_, out_, limits_, false);
  if (enc.encode(v)) return W::Ok;
  if (enc.error().status == CodecStatus::TooLarge) return fatal(SnapshotStatus::TooLarge, enc.error().message);
  if (enc.error().status == CodecStatus::GuestException) return guestFailed();
  return unstorable("object");
}

// When `v` is the `prototype` object of a function compiled from source, sets `owner` to it.
bool Writer::prototypeOwner(JSValueConst v, OwnedValue* owner) {
  OwnedValue ctor = ownData(ctx_, v, atomConstructor_.get());
  JSFunctionSnapshotInfo info;
  if (!JS_IsObject(ctor.get()) || !JS_GetFunctionSnapshotInfo(ctx_, ctor.get(), &info)) return false;
  OwnedValue proto = ownData(ctx_, ctor.get(), atomPrototype_.get());
  if (!JS_IsObject(proto.get()) || JS_VALUE_GET_PTR(proto.get()) != JS_VALUE_GET_PTR(v)) return false;
  *owner = std::move(ctor);
  return true;
}

W Writer::object(JSValueConst v, uint32_t depth) {
  auto seen = ids_.find(JS_VALUE_GET_PTR(v));
  if (seen != ids_.end()) {
    out_.tag(Tag::BackRef);
    out_.u32(seen->second);
    return W::Ok;
  }
  if (depth >= limits_.maxDepth)
    return fatal(SnapshotStatus::TooLarge, "the state is nested deeper than " + std::to_string(limits_.maxDepth) + " levels");
  if (JS_IsProxy(v)) return unstorable("Proxy");
  if (JS_IsFunction(ctx_, v)) return function(v, depth);
  if (JS_IsPromise(v)) return unstorable("Promise");
  if (JS_IsArray(v)) {
    number(v);
    return array(v, depth);
  }
  if (JS_IsDate(v) || JS_IsRegExp(v) || JS_IsError(v) || JS_IsArrayBuffer(v)) {
    number(v);
    return leaf(v);
  }
  if (JS_IsMap(v) || JS_IsSet(v)) {
    number(v);
    return collection(v, JS_IsMap(v), depth);
  }
  int typed = JS_GetTypedArrayType(v);
  if (typed >= 0) {
    number(v);
    return typedArray(v, typed, depth);
  }
  if (JS_GetClassID(v) != in_.objectClassId) {
    OwnedAtom cls(ctx_, JS_GetObjectClassName(ctx_, v));
    return unstorable(cls.get() == JS_ATOM_NULL ? std::string("object") : atomText(ctx_, cls.get()));
  }
  OwnedValue owner;
  if (prototypeOwner(v, &owner)) {
    // Not numbered: every reference resolves to the same object through its function.
    out_.tag(Tag::Prototype);
    return value(owner.get(), depth + 1);
  }
  OwnedValue proto(ctx_, JS_GetPrototype(ctx_, v));
  if (proto.isException()) return guestFailed();
  number(v);
  bool plain = JS_IsNull(proto.get()) || JS_VALUE_GET_PTR(proto.get()) == JS_VALUE_GET_PTR(objectProto_.get());
  if (plain) {
    out_.tag(Tag::Object);
    out_.u8(JS_IsNull(proto.get()) ? 1 : 0);
  } else {
    // Private fields and methods belong to the class that made the object; a re-created class
    // has new private names, so such an instance cannot be rebuilt.
    OwnedPropertyEnum privates(ctx_);
    if (!privates.load(v, JS_GPN_PRIVATE_MASK)) return guestFailed();
    if (privates.size() > 0) {
      ids_.erase(JS_VALUE_GET_PTR(v));
      numbered_.pop_back();
      return unstorable("instance with private fields");
    }
    out_.tag(Tag::Instance);
    W r = value(proto.get(), depth + 1);
    if (r != W::Ok) return r;
  }
  return properties(v, depth);
}

W Writer::function(JSValueConst v, uint32_t depth) {
  JSFunctionSnapshotInfo info;
  if (!JS_GetFunctionSnapshotInfo(ctx_, v, &info)) return unstorable("native function");
  if (!info.source) return unstorable("function without source text");
  OwnedValue name = ownData(ctx_, v, atomName_.get());
  std::string selfName = JS_IsString(name.get()) ? utf8Of(ctx_, name.get()) : std::string();
  bool captures = capturesLocals(ctx_, v, selfName, 0);
  OwnedValue proto = ownData(ctx_, v, atomPrototype_.get());
  if (!captures && isClassSource(info.source, info.source_len))
    captures = membersCaptureLocals(ctx_, v, selfName) ||
               (JS_IsObject(proto.get()) && membersCaptureLocals(ctx_, proto.get(), selfName));
  if (captures) return unstorable("closure");
  number(v);
  out_.tag(Tag::Function);
  out_.u32(static_cast<uint32_t>(info.source_len));
  out_.raw(info.source, info.source_len);
  W r = properties(v, depth);
  if (r != W::Ok) return r;
  if (!JS_IsObject(proto.get()) || JS_IsProxy(proto.get()) || JS_GetClassID(proto.get()) != in_.objectClassId) {
    out_.u32(0);
    return W::Ok;
  }
  path_.push_back({atomPrototype_.get(), 0});
  r = properties(proto.get(), depth);
  path_.pop_back();
  return r;
}

W Writer::properties(JSValueConst obj, uint32_t depth) {
  OwnedPropertyEnum keys(ctx_);
  if (!keys.load(obj, JS_GPN_STRING_MASK | JS_GPN_ENUM_ONLY)) return guestFailed();
  size_t countAt = out_.size();
  out_.u32(0);
  uint32_t count = 0;
  for (uint32_t i = 0; i < keys.size(); i++) {
    OwnedDescriptor d(ctx_);
    int r = d.load(obj, keys.atom(i));
    if (r < 0) return guestFailed();
    if (r == 0 || !(d.desc.flags & JS_PROP_ENUMERABLE)) continue;
    if (!atomKey(keys.atom(i))) return guestFailed();
    path_.push_back({keys.atom(i), 0});
    W w = W::Ok;
    w = d.isAccessor() ? accessor(d.desc.getter, d.desc.setter, depth + 1) : slot(d.desc.value, depth + 1);
    path_.pop_back();
    if (w != W::Ok) return w;
    count++;
  }
  out_.patchU32(countAt, count);
  return W::Ok;
}

W Writer::array(JSValueConst v, uint32_t depth) {
  int64_t length = 0;
  if (JS_GetLength(ctx_, v, &length) < 0) return guestFailed();
  OwnedPropertyEnum keys(ctx_);
  if (!keys.load(v, JS_GPN_STRING_MASK)) return guestFailed();
  out_.tag(Tag::Array);
  out_.u32(static_cast<uint32_t>(length));
  size_t countAt = out_.size();
  out_.u32(0);
  uint32_t count = 0;
  for (uint32_t i = 0; i < keys.size(); i++) {
    JSAtom atom = keys.atom(i);
    OwnedValue key(ctx_, JS_AtomToValue(ctx_, atom));
    uint32_t index;
    if (JS_VALUE_GET_TAG(key.get()) == JS_TAG_INT) {
      index = static_cast<uint32_t>(JS_VALUE_GET_INT(key.get()));
    } else {
      // Indices above 2^31-1 are string atoms; named properties of arrays are not stored.
      std::string text = utf8Of(ctx_, key.get());
      char* end = nullptr;
      unsigned long long n = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end || (text.size() > 1 && text[0] == '0') || n >= 0xFFFFFFFFull) continue;
      index = static_cast<uint32_t>(n);
    }
    OwnedDescriptor d(ctx_);
    int r = d.load(v, atom);
    if (r < 0) return guestFailed();
    if (r == 0) continue;
    out_.u32(index);
    path_.push_back({JS_ATOM_NULL, index});
    W w = W::Ok;
    w = d.isAccessor() ? accessor(d.desc.getter, d.desc.setter, depth + 1) : slot(d.desc.value, depth + 1);
    path_.pop_back();
    if (w != W::Ok) return w;
    count++;
  }
  out_.patchU32(countAt, count);
  return W::Ok;
}

JSValue collectionEntry(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int, void* opaque) {
  auto* self = static_cast<Writer*>(opaque);
  JSValueConst value = argc > 0 ? argv[0] : JS_UNDEFINED;
  JSValueConst key = argc > 1 ? argv[1] : JS_UNDEFINED;
  W r = self->value(self->collectionIsMap_ ? key : value, self->collectionDepth_ + 1);
  if (r == W::Ok && self->collectionIsMap_) r = self->value(value, self->collectionDepth_ + 1);
  if (r != W::Ok) {
    self->collectionStatus_ = r;
    // The engine's own exception (stack overflow, out of memory) travels up as it is.
    if (r == W::Fatal && JS_HasException(ctx)) return JS_EXCEPTION;
    self->ownStop_ = true;
    return JS_ThrowInternalError(ctx, "snapshot stopped");
  }
  self->collectionCount_++;
  return JS_UNDEFINED;
}

// Entries are walked with the captured built-in forEach; they are not slots, so an entry that
// cannot be stored makes the whole collection a placeholder.
W Writer::collection(JSValueConst v, bool isMap, uint32_t depth) {
  out_.tag(isMap ? Tag::Map : Tag::Set);
  size_t countAt = out_.size();
  out_.u32(0);
  bool savedIsMap = collectionIsMap_;
  uint32_t savedDepth = collectionDepth_, savedCount = collectionCount_;
  W savedStatus = collectionStatus_;
  bool savedOwnStop = ownStop_;
  ownStop_ = false;
  collectionIsMap_ = isMap;
  collectionDepth_ = depth;
  collectionCount_ = 0;
  collectionStatus_ = W::Ok;
  OwnedValue callback(ctx_, JS_NewCClosure(ctx_, collectionEntry, "", nullptr, 2, 0, this));
  W r = W::Ok;
  if (callback.isException()) {
    r = guestFailed();
  } else {
    JSValueConst args[1] = {callback.get()};
    OwnedValue done(ctx_, JS_Call(ctx_, (isMap ? in_.mapForEach : in_.setForEach).get(), v, 1, args));
    if (done.isException()) {
      if (ownStop_) JS_FreeValue(ctx_, JS_GetException(ctx_));  // our own stop signal
      r = collectionStatus_ != W::Ok ? collectionStatus_ : guestFailed();
    }
  }
  uint32_t count = collectionCount_;
  collectionIsMap_ = savedIsMap;
  collectionDepth_ = savedDepth;
  collectionCount_ = savedCount;
  collectionStatus_ = savedStatus;
  ownStop_ = savedOwnStop;
  if (r == W::Ok) out_.patchU32(countAt, count);
  return r;
}

W Writer::typedArray(JSValueConst v, int type, uint32_t depth) {
  size_t offset = 0, byteLength = 0, bpe = 1;
  OwnedValue buffer(ctx_, JS_GetTypedArrayBuffer(ctx_, v, &offset, &byteLength, &bpe));
  if (buffer.isException()) return guestFailed();
  TypedKind kind = TypedKind::Count;
  for (const auto& k : kTypedKinds)
    if (k.qjs == type) kind = k.wire;
  if (kind == TypedKind::Count) return unstorable("typed array");
  out_.tag(Tag::TypedArray);
  out_.u8(static_cast<uint8_t>(kind));
  W r = value(buffer.get(), depth + 1);
  if (r != W::Ok) return r;
  out_.u32(static_cast<uint32_t>(offset));
  out_.u32(static_cast<uint32_t>(bpe ? byteLength / bpe : 0));
  return W::Ok;
}

bool Writer::collect(JSValueConst holder, Binding defaultBinding, const std::unordered_set<std::u16string>& baseline,
                     const std::unordered_set<std::u16string>& exclude, OwnedPropertyEnum& keys,
                     std::vector<Entry>* entries) {
  if (!keys.load(holder, JS_GPN_STRING_MASK)) return false;
  std::u16string name;
  for (uint32_t i = 0; i < keys.size(); i++) {
    OwnedValue key(ctx_, JS_AtomToValue(ctx_, keys.atom(i)));
    GuestUtf16 u(ctx_, key.get());
    if (!u.ok()) return false;
    name.assign(reinterpret_cast<const char16_t*>(u.data()), u.size());
    if (defaultBinding == Binding::GlobalProperty && (baseline.count(name) || exclude.count(name))) continue;
    OwnedDescriptor d(ctx_);
    int r = d.load(holder, keys.atom(i));
    if (r < 0) return false;
    if (r == 0) continue;
    if (JS_IsUninitialized(d.desc.value)) continue;  // a let/const whose initializer threw: never usable
    Entry e{defaultBinding, 0, keys.atom(i), OwnedValue(), OwnedValue(), OwnedValue(), d.isAccessor()};
    if (defaultBinding == Binding::GlobalProperty) {
      e.flags = static_cast<uint8_t>(d.desc.flags & (JS_PROP_CONFIGURABLE | JS_PROP_WRITABLE | JS_PROP_ENUMERABLE));
    } else if (!(d.desc.flags & JS_PROP_WRITABLE)) {
      e.binding = Binding::LexicalConst;
    }
    if (!e.accessor) e.value = OwnedValue::dup(ctx_, d.desc.value);
    else {
      e.getter = OwnedValue::dup(ctx_, d.desc.getter);
      e.setter = OwnedValue::dup(ctx_, d.desc.setter);
    }
    entries->push_back(std::move(e));
  }
  return true;
}

SnapshotResult Writer::run(const std::unordered_set<std::u16string>& baseline,
                           const std::unordered_set<std::u16string>& exclude) {
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedValue lexical(ctx_, JS_GetGlobalLexicalObject(ctx_));
  OwnedPropertyEnum globalKeys(ctx_), lexicalKeys(ctx_);
  std::vector<Entry> entries;
  if (!collect(global.get(), Binding::GlobalProperty, baseline, exclude, globalKeys, &entries) ||
      !collect(lexical.get(), Binding::Lexical, baseline, exclude, lexicalKeys, &entries)) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    guestFailed();
    return std::move(result_);
  }
  // Functions and classes first (in creation order), so a class's `extends` and static
  // initializers find the classes and functions declared before it when the source is re-run.
  std::stable_partition(entries.begin(), entries.end(),
                        [&](const Entry& e) { return !e.accessor && JS_IsFunction(ctx_, e.value.get()); });
  out_.u32(static_cast<uint32_t>(entries.size()));
  for (const Entry& e : entries) {
    out_.u8(static_cast<uint8_t>(e.binding));
    out_.u8(e.flags);
    if (!atomKey(e.atom)) {
      guestFailed();
      return std::move(result_);
    }
  }
  for (const Entry& e : entries) {
    path_.assign(1, {e.atom, 0});
    W r = W::Ok;
    r = e.accessor ? accessor(e.getter.get(), e.setter.get(), 0) : slot(e.value.get(), 0);
    if (r != W::Ok) {
      if (result_.status == SnapshotStatus::Ok) guestFailed();
      takeEngineFailure(ctx_, &result_);
      return std::move(result_);
    }
  }
  return std::move(result_);
}

// ---------------------------------------------------------------------------------------------
// Reader

// Assigning to a placeholder replaces it with an ordinary data property.
JSValue replaceNotRestored(JSContext* ctx, JSValueConst self, int argc, JSValueConst* argv, int, JSValueConst* data) {
  if (!JS_IsObject(self)) return JS_UNDEFINED;
  OwnedAtom key(ctx, JS_ValueToAtom(ctx, data[0]));
  if (key.get() == JS_ATOM_NULL) return JS_EXCEPTION;
  JSValue v = argc > 0 ? JS_DupValue(ctx, argv[0]) : JS_UNDEFINED;
  if (JS_DefinePropertyValue(ctx, self, key.get(), v, JS_PROP_C_W_E) < 0) return JS_EXCEPTION;
  return JS_UNDEFINED;
}

// Skips one leaf value (tag included) and returns its size; false when malformed.
bool leafSize(const uint8_t* p, size_t n, size_t* size) {
  WireReader r(p, n);
  auto skipString = [&r]() {
    Tag t;
    uint32_t len;
    const uint8_t* data;
    if (!r.tag(&t) || !r.u32(&len)) return false;
    if (t == Tag::Latin1) return r.bytes(&data, len);
    return t == Tag::String && len <= r.remaining() / 2 && r.bytes(&data, static_cast<size_t>(len) * 2);
  };
  Tag t;
  if (!r.tag(&t)) return false;
  bool ok = false;
  switch (t) {
    case Tag::BigInt:
    case Tag::BigIntHex: ok = skipString(); break;
    case Tag::Date: {
      double d;
      ok = r.f64(&d);
      break;
    }
    case Tag::RegExp: ok = skipString() && skipString(); break;
    case Tag::Error: {
      ok = skipString() && skipString();
      if (!ok) break;
      WireReader peek = r;
      Tag next;
      if (peek.tag(&next) && next == Tag::Undefined) ok = r.tag(&next);
      else ok = skipString();
      break;
    }
    case Tag::ArrayBuffer: {
      uint32_t len;
      const uint8_t* data;
      ok = r.u32(&len) && r.bytes(&data, len);
      break;
    }
    default: break;
  }
  if (ok) *size = n - r.remaining();
  return ok;
}

class Reader {
 public:
  Reader(JSContext* ctx, const Intrinsics& in, const WireLimits& limits, const uint8_t* data, size_t size)
      : ctx_(ctx), in_(in), limits_(limits), base_(data), size_(size), rd_(data, size),
        atomPrototype_(ctx, JS_NewAtom(ctx, "prototype")) {}
  ~Reader() {
    for (JSValue v : objects_) JS_FreeValue(ctx_, v);
    for (auto& [raw, atom] : keyAtoms_) JS_FreeAtom(ctx_, atom);
  }

  SnapshotResult run();

 private:
  // A value that could not be re-created, reported at the nearest slot.
  struct Failure {
    std::string type;
  };

  JSValue value(uint32_t depth, bool slot);
  JSValue leaf();
  JSValue function(uint32_t depth);
  bool properties(JSValueConst target, uint32_t depth);
  bool slotValue(JSValueConst target, JSAtom key, std::string_view segment, uint32_t depth);
  bool defineSlot(JSValueConst target, JSAtom key, JSValue v);
  bool definePlaceholder(JSValueConst target, JSAtom key, const std::string& name, const std::string& type, int flags,
                         bool reported = false);
  JSValue evaluate(const uint8_t* source, uint32_t size);
  bool readKey(std::u16string* key) { return readString(rd_, key); }
  // Reads a property name; its atom is cached by its wire bytes. Returns JS_ATOM_NULL (status
  // set) on failure; the atom is borrowed from the cache.
  JSAtom readKeyAtom(std::string_view* raw);
  JSAtom atomOf(const std::u16string& key);  // a new atom, JS_ATOM_NULL on failure
  std::string pathText();
  JSValue invalid(const char* what) {
    if (result_.status == SnapshotStatus::Ok) {
      result_.status = SnapshotStatus::Invalid;
      result_.message = std::string("malformed snapshot: ") + what;
    }
    return JS_EXCEPTION;
  }
  JSValue guestFailed() {
    if (result_.status == SnapshotStatus::Ok) {
      result_.status = SnapshotStatus::OutOfMemory;
      result_.message = "the engine raised while restoring the snapshot";
    }
    return JS_EXCEPTION;
  }
  static bool fail(JSValue) { return false; }
  JSValue remember(JSValue v) {
    objects_.push_back(JS_DupValue(ctx_, v));
    return v;
  }

  JSContext* ctx_;
  const Intrinsics& in_;
  const WireLimits& limits_;
  const uint8_t* base_;
  size_t size_;
  WireReader rd_;
  OwnedAtom atomPrototype_;
  std::vector<JSValue> objects_;  // counted: JS_NULL marks a function that did not re-create
  // Path segments as wire bytes of a name, or "[index]" text (prefixed by a NUL byte).
  std::vector<std::string_view> path_;
  std::deque<std::string> indexTexts_;  // a deque: growing it keeps earlier texts in place
  std::unordered_map<std::string_view, JSAtom> keyAtoms_;  // counted atoms
  uint32_t nodes_ = 0;
  // Set by a value that could not be re-created or a placeholder, taken by the enclosing slot.
  std::optional<Failure> failure_;
  struct PendingPlaceholder {
    std::string type, name;
    bool reported;  // carried over from an earlier restore, which listed it
  };
  std::optional<PendingPlaceholder> placeholder_;
  std::optional<std::pair<OwnedValue, OwnedValue>> accessor_;         // (getter, setter)
  SnapshotResult result_;
};

std::string Reader::pathText() {
  std::string text;
  for (std::string_view seg : path_) {
    if (!seg.empty() && seg[0] == '\0') {
      text.append(seg.substr(1));
      continue;
    }
    std::u16string name;
    WireReader r(reinterpret_cast<const uint8_t*>(seg.data()), seg.size());
    if (!readString(r, &name)) continue;
    if (!text.empty()) text += ".";
    text += utf8Of(ctx_, name);
  }
  return text;
}

JSAtom Reader::readKeyAtom(std::string_view* raw) {
  size_t at = size_ - rd_.remaining();
  Tag t;
  uint32_t n;
  const uint8_t* units;
  if (!rd_.tag(&t) || (t != Tag::String && t != Tag::Latin1) || !rd_.u32(&n) ||
      (t == Tag::String && n > rd_.remaining() / 2) || !rd_.bytes(&units, t == Tag::String ? size_t{n} * 2 : n)) {
    invalid("bad property name");
    return JS_ATOM_NULL;
  }
  *raw = std::string_view(reinterpret_cast<const char*>(base_ + at), size_ - rd_.remaining() - at);
  auto cached = keyAtoms_.find(*raw);
  if (cached != keyAtoms_.end()) return cached->second;
  std::u16string key;
  WireReader again(base_ + at, raw->size());
  readString(again, &key);
  JSAtom atom = atomOf(key);
  if (atom == JS_ATOM_NULL) {
    guestFailed();
    return JS_ATOM_NULL;
  }
  keyAtoms_.emplace(*raw, atom);
  return atom;
}

JSAtom Reader::atomOf(const std::u16string& key) {
  OwnedValue s(ctx_, JS_NewStringUTF16(ctx_, reinterpret_cast<const uint16_t*>(key.data()), key.size()));
  if (s.isException()) return JS_ATOM_NULL;
  return JS_ValueToAtom(ctx_, s.get());
}

bool Reader::definePlaceholder(JSValueConst target, JSAtom key, const std::string& name, const std::string& type,
                               int flags, bool reported) {
  JSRuntime* rt = JS_GetRuntime(ctx_);
  std::call_once(placeholderClassIdOnce, [rt] { JS_NewClassID(rt, &placeholderClassId); });
  if (!JS_IsRegisteredClass(rt, placeholderClassId) && JS_NewClass(rt, placeholderClassId, &kPlaceholderClass) < 0) return false;
  OwnedValue keyValue(ctx_, JS_AtomToValue(ctx_, key));
  if (keyValue.isException()) return false;
  JSValue keyData[1] = {keyValue.get()};
  OwnedValue getter(ctx_, JS_NewObjectProtoClass(ctx_, OwnedValue(ctx_, JS_GetFunctionProto(ctx_)).get(), placeholderClassId));
  if (getter.isException()) return false;
  JS_SetOpaque(getter.get(), new PlaceholderInfo{name, type});
  OwnedValue setter(ctx_, JS_NewCFunctionData(ctx_, replaceNotRestored, 1, 0, 1, keyData));
  if (setter.isException()) return false;
  if (!reported) result_.notRestored.push_back({name, type});
  return JS_DefineProperty(ctx_, target, key, JS_UNDEFINED, getter.get(), setter.get(),
                           JS_PROP_HAS_GET | JS_PROP_HAS_SET | JS_PROP_HAS_CONFIGURABLE | JS_PROP_HAS_ENUMERABLE |
                               (flags & (JS_PROP_CONFIGURABLE | JS_PROP_ENUMERABLE))) >= 0;
}

// Defines the value just read at `key`, or a placeholder when it was one or could not be re-created.
bool Reader::defineSlot(JSValueConst target, JSAtom key, JSValue v) {
  std::optional<std::pair<OwnedValue, OwnedValue>> accessor = std::move(accessor_);
  accessor_.reset();
  if (accessor && !failure_) {
    JS_FreeValue(ctx_, v);
    return JS_DefineProperty(ctx_, target, key, JS_UNDEFINED, accessor->first.get(), accessor->second.get(),
                             JS_PROP_HAS_GET | JS_PROP_HAS_SET | JS_PROP_HAS_CONFIGURABLE | JS_PROP_HAS_ENUMERABLE |
                                 JS_PROP_CONFIGURABLE | JS_PROP_ENUMERABLE) >= 0;
  }
  if (placeholder_) {
    JS_FreeValue(ctx_, v);
    PendingPlaceholder p = std::move(*placeholder_);
    placeholder_.reset();
    failure_.reset();
    return definePlaceholder(target, key, p.name, p.type, JS_PROP_C_W_E, p.reported);
  }
  if (failure_) {
    JS_FreeValue(ctx_, v);
    std::string type = std::move(failure_->type);
    failure_.reset();
    return definePlaceholder(target, key, pathText(), type, JS_PROP_C_W_E);
  }
  return JS_DefinePropertyValue(ctx_, target, key, v, JS_PROP_C_W_E) >= 0;
}

bool Reader::properties(JSValueConst target, uint32_t depth) {
  uint32_t count;
  if (!rd_.u32(&count)) return fail(invalid("truncated properties"));
  if (count > rd_.remaining()) return fail(invalid("property count larger than data"));
  for (uint32_t i = 0; i < count; i++) {
    std::string_view raw;
    JSAtom atom = readKeyAtom(&raw);
    if (atom == JS_ATOM_NULL || !slotValue(target, atom, raw, depth + 1)) return false;
  }
  return true;
}

// Reads one slot's value and defines it. A failure pending from the enclosing value is set
// aside meanwhile, so it is reported where it happened.
bool Reader::slotValue(JSValueConst target, JSAtom key, std::string_view segment, uint32_t depth) {
  std::optional<Failure> outer = std::move(failure_);
  failure_.reset();
  path_.push_back(segment);
  JSValue v = value(depth, true);
  bool ok = !JS_IsException(v) && defineSlot(target, key, v);
  path_.pop_back();
  if (JS_IsException(v)) return false;
  if (!ok) return fail(guestFailed());
  if (outer) failure_ = std::move(outer);
  return true;
}

JSValue Reader::leaf() {
  size_t at = size_ - rd_.remaining(), size;
  const uint8_t* start = base_ + at;
  if (!leafSize(start, rd_.remaining(), &size)) return invalid("bad value");
  const uint8_t* skipped;
  rd_.bytes(&skipped, size);
  WireReader sub(start, size);
  GuestDecoder dec(ctx_, in_, limits_);
  JSValue v = dec.decode(sub);
  if (!JS_IsException(v)) return v;
  if (dec.error().status == CodecStatus::GuestException) return guestFailed();
  return invalid("bad value");
}

// Re-creates a function from its source: as an expression, or (methods and accessors written
// with the shorthand syntax) as the one member of an object literal.
JSValue Reader::evaluate(const uint8_t* source, uint32_t size) {
  static const char* const kForms[2][2] = {{"(", "\n)"}, {"({", "\n})"}};
  std::string lastError;
  for (int form = 0; form < 2; form++) {
    std::string code = kForms[form][0];
    code.append(reinterpret_cast<const char*>(source), size);
    code += kForms[form][1];
    OwnedValue result(ctx_, JS_Eval(ctx_, code.c_str(), code.size(), "<snapshot>", JS_EVAL_TYPE_GLOBAL));
    if (result.isException()) {
      OwnedValue exc(ctx_, JS_GetException(ctx_));
      if (JS_IsUncatchableError(exc.get()) || JS_IsNull(exc.get())) {
        JS_Throw(ctx_, exc.release());
        return JS_EXCEPTION;
      }
      OwnedValue text(ctx_, JS_ToString(ctx_, exc.get()));
      if (text.isException()) JS_FreeValue(ctx_, JS_GetException(ctx_));
      else lastError = utf8Of(ctx_, text.get());
      continue;
    }
    if (form == 0) {
      if (JS_IsFunction(ctx_, result.get())) return result.release();
      lastError = "the source is not a function";
      continue;
    }
    OwnedPropertyEnum keys(ctx_);
    if (!keys.load(result.get(), JS_GPN_STRING_MASK | JS_GPN_SYMBOL_MASK) || keys.size() != 1) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      break;
    }
    OwnedDescriptor d(ctx_);
    if (d.load(result.get(), keys.atom(0)) != 1) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      break;
    }
    for (JSValueConst f : {d.desc.value, d.desc.getter, d.desc.setter})
      if (JS_IsFunction(ctx_, f)) return JS_DupValue(ctx_, f);
  }
  failure_ = Failure{"function whose source did not evaluate" + (lastError.empty() ? "" : ": " + lastError)};
  return JS_NULL;
}

JSValue Reader::function(uint32_t depth) {
  uint32_t size;
  const uint8_t* source;
  if (!rd_.u32(&size) || !rd_.bytes(&source, size)) return invalid("truncated function");
  size_t slot = objects_.size();
  objects_.push_back(JS_UNDEFINED);
  OwnedValue fn(ctx_, evaluate(source, size));
  if (fn.isException()) {
    if (result_.status == SnapshotStatus::Ok) {
      OwnedValue exc(ctx_, JS_GetException(ctx_));
      result_.status = JS_IsNull(exc.get()) ? SnapshotStatus::OutOfMemory : SnapshotStatus::Interrupted;
      result_.message = result_.status == SnapshotStatus::OutOfMemory
                            ? "the engine ran out of memory while re-creating functions"
                            : "the time budget ran out while re-creating functions";
    }
    return JS_EXCEPTION;
  }
  objects_[slot] = JS_DupValue(ctx_, fn.get());  // JS_NULL when it did not re-create
  std::optional<Failure> failed = std::move(failure_);
  failure_.reset();
  // Properties are read even when the function did not re-create, to stay in step with the data.
  OwnedValue scratch(ctx_, JS_NewObjectProto(ctx_, JS_NULL));
  if (scratch.isException()) return guestFailed();
  bool alive = JS_IsObject(fn.get());
  if (!properties(alive ? fn.get() : scratch.get(), depth)) return JS_EXCEPTION;
  OwnedValue proto = alive ? [&] {
    OwnedDescriptor d(ctx_);
    int r = d.load(fn.get(), atomPrototype_.get());
    if (r < 0) JS_FreeValue(ctx_, JS_GetException(ctx_));
    return r == 1 && !d.isAccessor() && JS_IsObject(d.desc.value) ? OwnedValue::dup(ctx_, d.desc.value)
                                                                   : OwnedValue(ctx_, JS_UNDEFINED);
  }() : OwnedValue(ctx_, JS_UNDEFINED);
  static const std::string_view kPrototype("\x14\x09\0\0\0prototype", 14);
  path_.push_back(kPrototype);
  bool ok = properties(JS_IsObject(proto.get()) ? proto.get() : scratch.get(), depth);
  path_.pop_back();
  if (!ok) return JS_EXCEPTION;
  if (failed) {
    failure_ = std::move(failed);
    return JS_UNDEFINED;
  }
  return fn.release();
}

JSValue Reader::value(uint32_t depth, bool slot) {
  if (++nodes_ > limits_.maxNodes) return invalid("too many values");
  if (depth > limits_.maxDepth) return invalid("nested too deeply");
  size_t at = size_ - rd_.remaining();
  Tag tag;
  if (!rd_.tag(&tag)) return invalid("truncated");
  switch (tag) {
    case Tag::Undefined: return JS_UNDEFINED;
    case Tag::Null: return JS_NULL;
    case Tag::False: return JS_FALSE;
    case Tag::True: return JS_TRUE;
    case Tag::Int32: {
      int32_t i;
      if (!rd_.i32(&i)) return invalid("truncated int");
      return JS_NewInt32(ctx_, i);
    }
    case Tag::Float64: {
      double d;
      if (!rd_.f64(&d)) return invalid("truncated number");
      return JS_NewFloat64(ctx_, d);
    }
    case Tag::String:
    case Tag::Latin1: {
      std::u16string text;
      if (!readStringBody(rd_, tag, &text)) return invalid("bad string");
      JSValue v = JS_NewStringUTF16(ctx_, reinterpret_cast<const uint16_t*>(text.data()), text.size());
      return JS_IsException(v) ? guestFailed() : v;
    }
    case Tag::BigInt:
    case Tag::BigIntHex:
    case Tag::Date:
    case Tag::RegExp:
    case Tag::Error:
    case Tag::ArrayBuffer: {
      // Rewind over the tag: the boundary codec reads the whole leaf.
      WireReader rewound(base_ + at, size_ - at);
      rd_ = rewound;
      JSValue v = leaf();
      return JS_IsException(v) || tag == Tag::BigInt || tag == Tag::BigIntHex ? v : remember(v);
    }
    case Tag::Array: {
      uint32_t length, count;
      if (!rd_.u32(&length) || !rd_.u32(&count)) return invalid("truncated array");
      if (count > rd_.remaining()) return invalid("array count larger than data");
      OwnedValue arr(ctx_, JS_NewArray(ctx_));
      if (arr.isException()) return guestFailed();
      remember(arr.get());
      for (uint32_t i = 0; i < count; i++) {
        uint32_t index;
        if (!rd_.u32(&index)) return invalid("truncated array entry");
        if (index >= length) return invalid("array index out of range");
        OwnedAtom atom(ctx_, JS_NewAtomUInt32(ctx_, index));
        if (atom.get() == JS_ATOM_NULL) return guestFailed();
        indexTexts_.push_back(std::string(1, '\0') + "[" + std::to_string(index) + "]");
        bool ok = slotValue(arr.get(), atom.get(), indexTexts_.back(), depth + 1);
        indexTexts_.pop_back();
        if (!ok) return JS_EXCEPTION;
      }
      if (JS_SetLength(ctx_, arr.get(), length) < 0) return guestFailed();
      return arr.release();
    }
    case Tag::Object:
    case Tag::Instance: {
      uint8_t flags = 0;
      if (tag == Tag::Object && !rd_.u8(&flags)) return invalid("truncated object");
      OwnedValue obj(ctx_, (flags & 1) ? JS_NewObjectProto(ctx_, JS_NULL) : JS_NewObject(ctx_));
      if (obj.isException()) return guestFailed();
      remember(obj.get());
      if (tag == Tag::Instance) {
        // Made first and numbered before its prototype, as written, so cycles through it resolve.
        OwnedValue proto(ctx_, value(depth + 1, false));
        if (proto.isException()) return JS_EXCEPTION;
        if (JS_IsObject(proto.get()) && JS_SetPrototype(ctx_, obj.get(), proto.get()) < 0) {
          JS_FreeValue(ctx_, JS_GetException(ctx_));
          return invalid("bad prototype");
        }
        if (!JS_IsObject(proto.get()) && !failure_) return invalid("prototype is not an object");
      }
      if (!properties(obj.get(), depth)) return JS_EXCEPTION;
      return obj.release();
    }
    case Tag::Map:
    case Tag::Set: {
      bool isMap = tag == Tag::Map;
      uint32_t count;
      if (!rd_.u32(&count)) return invalid("truncated collection");
      if (count > rd_.remaining()) return invalid("collection count larger than data");
      OwnedValue coll(ctx_, JS_CallConstructor(ctx_, (isMap ? in_.mapCtor : in_.setCtor).get(), 0, nullptr));
      if (coll.isException()) return guestFailed();
      remember(coll.get());
      for (uint32_t i = 0; i < count; i++) {
        OwnedValue key(ctx_, value(depth + 1, false));
        if (key.isException()) return JS_EXCEPTION;
        OwnedValue val(ctx_, isMap ? value(depth + 1, false) : JS_UNDEFINED);
        if (val.isException()) return JS_EXCEPTION;
        JSValueConst args[2] = {key.get(), val.get()};
        OwnedValue r(ctx_, JS_Call(ctx_, (isMap ? in_.mapSet : in_.setAdd).get(), coll.get(), isMap ? 2 : 1, args));
        if (r.isException()) return guestFailed();
      }
      return coll.release();
    }
    case Tag::TypedArray: {
      uint8_t kind;
      if (!rd_.u8(&kind) || kind >= static_cast<uint8_t>(TypedKind::DataView)) return invalid("bad typed array kind");
      size_t slotIndex = objects_.size();
      objects_.push_back(JS_UNDEFINED);  // the view is numbered before its buffer, as written
      OwnedValue buffer(ctx_, value(depth + 1, false));
      if (buffer.isException()) return JS_EXCEPTION;
      if (!JS_IsArrayBuffer(buffer.get())) return invalid("typed array without a buffer");
      uint32_t offset, length;
      if (!rd_.u32(&offset) || !rd_.u32(&length)) return invalid("truncated typed array");
      size_t bufSize = 0;
      if (!JS_GetArrayBuffer(ctx_, &bufSize, buffer.get())) return guestFailed();
      uint32_t elementSize = typedKindElementSize(static_cast<TypedKind>(kind));
      uint64_t end = static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) * elementSize;
      if (end > bufSize || offset % elementSize != 0) return invalid("typed array outside its buffer");
      JSTypedArrayEnum type = JS_TYPED_ARRAY_UINT8;
      for (const auto& k : kTypedKinds)
        if (static_cast<uint8_t>(k.wire) == kind) type = k.qjs;
      JSValue args[3] = {buffer.get(), JS_NewInt64(ctx_, offset), JS_NewInt64(ctx_, length)};
      JSValue v = JS_NewTypedArray(ctx_, 3, args, type);
      if (JS_IsException(v)) return guestFailed();
      objects_[slotIndex] = JS_DupValue(ctx_, v);
      return v;
    }
    case Tag::Function: return function(depth);
    case Tag::Prototype: {
      OwnedValue fn(ctx_, value(depth + 1, false));
      if (fn.isException()) return JS_EXCEPTION;
      if (failure_) return JS_UNDEFINED;
      if (!JS_IsFunction(ctx_, fn.get())) return invalid("prototype of a value that is not a function");
      OwnedDescriptor d(ctx_);
      int r = d.load(fn.get(), atomPrototype_.get());
      if (r < 0) return guestFailed();
      if (r == 0 || d.isAccessor() || !JS_IsObject(d.desc.value)) return invalid("function without a prototype");
      return JS_DupValue(ctx_, d.desc.value);
    }
    case Tag::Accessor: {
      if (!slot) return invalid("accessor outside a property");
      OwnedValue getter(ctx_, value(depth + 1, false));
      if (getter.isException()) return JS_EXCEPTION;
      OwnedValue setter(ctx_, value(depth + 1, false));
      if (setter.isException()) return JS_EXCEPTION;
      for (JSValueConst f : {getter.get(), setter.get()})
        if (!JS_IsUndefined(f) && !JS_IsFunction(ctx_, f) && !failure_) return invalid("accessor that is not a function");
      accessor_.emplace(std::move(getter), std::move(setter));
      return JS_UNDEFINED;
    }
    case Tag::Placeholder:
    case Tag::ReportedPlaceholder: {
      std::u16string type, name;
      if (!readString(rd_, &type) || !readString(rd_, &name)) return invalid("bad placeholder");
      if (!slot) return invalid("placeholder outside a property");
      placeholder_.emplace(PendingPlaceholder{utf8Of(ctx_, type), utf8Of(ctx_, name), tag == Tag::ReportedPlaceholder});
      return JS_UNDEFINED;
    }
    case Tag::BackRef: {
      uint32_t id;
      if (!rd_.u32(&id)) return invalid("truncated reference");
      if (id >= objects_.size() || JS_IsUndefined(objects_[id])) return invalid("reference to an unknown object");
      if (JS_IsNull(objects_[id])) {
        failure_ = Failure{"function whose source did not evaluate"};
        return JS_UNDEFINED;
      }
      return JS_DupValue(ctx_, objects_[id]);
    }
    default: return invalid("unknown tag");
  }
}

SnapshotResult Reader::run() {
  uint32_t count;
  if (!rd_.u32(&count)) {
    invalid("truncated");
    return std::move(result_);
  }
  // Each entry takes at least 2 bytes of header, a 5-byte name and a 1-byte value.
  if (count > rd_.remaining() / 8) {
    invalid("more globals than data");
    return std::move(result_);
  }
  struct Entry {
    Binding binding;
    uint8_t flags;
    std::u16string name;
    std::string_view raw;  // the name's wire bytes, for paths
  };
  std::vector<Entry> entries(count);
  std::unordered_set<std::u16string> names;
  for (Entry& e : entries) {
    uint8_t binding;
    size_t nameAt = 0;
    if (!rd_.u8(&binding) || binding >= static_cast<uint8_t>(Binding::Count) || !rd_.u8(&e.flags) ||
        (nameAt = size_ - rd_.remaining(), !readKey(&e.name)) || e.name.empty()) {
      invalid("bad global entry");
      return std::move(result_);
    }
    e.raw = std::string_view(reinterpret_cast<const char*>(base_ + nameAt), size_ - rd_.remaining() - nameAt);
    e.binding = static_cast<Binding>(binding);
    if (!names.insert(e.name).second) {
      invalid("a global appears twice");
      return std::move(result_);
    }
  }
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedValue lexical(ctx_, JS_GetGlobalLexicalObject(ctx_));
  // Every binding exists (as undefined) before any source runs, so a class's static initializer
  // or computed key that reads another global finds it instead of throwing.
  std::vector<std::unique_ptr<OwnedAtom>> atoms;
  atoms.reserve(count);
  for (const Entry& e : entries) {
    atoms.push_back(std::make_unique<OwnedAtom>(ctx_, atomOf(e.name)));
    JSValueConst holder = e.binding == Binding::GlobalProperty ? global.get() : lexical.get();
    if (atoms.back()->get() == JS_ATOM_NULL ||
        JS_DefinePropertyValue(ctx_, holder, atoms.back()->get(), JS_UNDEFINED, JS_PROP_C_W_E) < 0) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      guestFailed();
      return std::move(result_);
    }
  }
  for (size_t i = 0; i < entries.size(); i++) {
    const Entry& e = entries[i];
    JSAtom atom = atoms[i]->get();
    path_.assign(1, e.raw);
    JSValue v = value(0, true);
    if (JS_IsException(v)) return std::move(result_);
    bool lexicalBinding = e.binding != Binding::GlobalProperty;
    int ok;
    if (placeholder_ || failure_ || accessor_) {
      // The global lexical object holds plain values only; a placeholder lives on the global object.
      if (lexicalBinding) JS_DeleteProperty(ctx_, lexical.get(), atom, 0);
      ok = defineSlot(global.get(), atom, v) ? 0 : -1;
    } else if (lexicalBinding) {
      int flags = JS_PROP_ENUMERABLE | JS_PROP_CONFIGURABLE | (e.binding == Binding::Lexical ? JS_PROP_WRITABLE : 0);
      ok = JS_DefinePropertyValue(ctx_, lexical.get(), atom, v, flags);
    } else {
      int flags = e.flags & (JS_PROP_CONFIGURABLE | JS_PROP_WRITABLE | JS_PROP_ENUMERABLE);
      ok = JS_DefineProperty(ctx_, global.get(), atom, v, JS_UNDEFINED, JS_UNDEFINED,
                             flags | JS_PROP_HAS_VALUE | JS_PROP_HAS_CONFIGURABLE | JS_PROP_HAS_WRITABLE |
                                 JS_PROP_HAS_ENUMERABLE);
      JS_FreeValue(ctx_, v);
    }
    if (ok < 0) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      guestFailed();
      return std::move(result_);
    }
  }
  if (!rd_.atEnd()) invalid("trailing bytes");
  return std::move(result_);
}

}  // namespace

SnapshotResult writeSnapshotBody(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits,
                                 const std::unordered_set<std::u16string>& baseline,
                                 const std::unordered_set<std::u16string>& exclude, WireWriter& out) {
  Writer w(ctx, intrinsics, limits, out);
  return w.run(baseline, exclude);
}

SnapshotResult readSnapshotBody(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits,
                                const uint8_t* data, size_t size) {
  Reader r(ctx, intrinsics, limits, data, size);
  return r.run();
}

// ---------------------------------------------------------------------------------------------
// Engine entry points

namespace {

// The global names every fresh sandbox has, read once from a throwaway engine, so a snapshot
// stores only what guest code (or setGlobal) added.
const std::unordered_set<std::u16string>& baselineGlobals(const EngineOptions& options) {
  static const std::unordered_set<std::u16string> names = [&options] {
    std::unordered_set<std::u16string> out;
    Engine fresh(0, options, nullptr);
    JSContext* ctx = fresh.context();
    if (!ctx) return out;
    OwnedValue global(ctx, JS_GetGlobalObject(ctx));
    OwnedPropertyEnum keys(ctx);
    if (!keys.load(global.get(), JS_GPN_STRING_MASK)) return out;
    for (uint32_t i = 0; i < keys.size(); i++) {
      OwnedValue key(ctx, JS_AtomToValue(ctx, keys.atom(i)));
      GuestUtf16 u(ctx, key.get());
      if (u.ok()) out.emplace(reinterpret_cast<const char16_t*>(u.data()), u.size());
    }
    return out;
  }();
  return names;
}

}  // namespace

SnapshotResult Engine::writeSnapshot(const std::unordered_set<std::u16string>& exclude, uint64_t maxBytes,
                                     std::vector<uint8_t>* out) {
  if (!ctx_) return {SnapshotStatus::Invalid, "the sandbox is broken or disposed", {}};
  const auto& baseline = baselineGlobals(options_);
  if (!clampStack()) return {SnapshotStatus::StackExhausted, stackRefusal(), {}};
  WireLimits limits = limits_;
  limits.maxBytes = maxBytes;
  WireWriter w;
  SnapshotResult r = writeSnapshotBody(ctx_, intrinsics_, limits, baseline, exclude, w);
  if (r.status == SnapshotStatus::Ok && w.size() > maxBytes) {
    r.status = SnapshotStatus::TooLarge;
    r.message = "the snapshot is larger than " + std::to_string(maxBytes) + " bytes";
  }
  if (r.status == SnapshotStatus::Ok) *out = std::move(w.bytes());
  return r;
}

SnapshotResult Engine::readSnapshot(const uint8_t* data, size_t size, double budgetMs) {
  if (!ctx_) return {SnapshotStatus::Invalid, "the sandbox is broken or disposed", {}};
  stop_.store(0);
  executionMs_ = 0;
  if (!enterGuest(budgetMs)) {
    leaveGuest();
    return {SnapshotStatus::StackExhausted, stackRefusal(), {}};
  }
  SnapshotResult r = readSnapshotEntered(data, size);
  leaveGuest();
  return r;
}

SnapshotResult Engine::readSnapshotEntered(const uint8_t* data, size_t size) {
  WireLimits limits = limits_;
  limits.maxBytes = size;
  SnapshotResult r = readSnapshotBody(ctx_, intrinsics_, limits, data, size);
  takeEngineFailure(ctx_, &r);
  // Nothing restored may leave work behind for the first eval.
  JS_DropPendingJobs(rt_);
  return r;
}

}  // namespace qjsn
