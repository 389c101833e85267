// The snapshot body writer: every user-defined global as one graph, through the shared value
// walk (value_walk.h), plus what only snapshots store: functions and classes as source text,
// instances with their prototype, accessors, and placeholders for what cannot be stored.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "guest_codec.h"
#include "snapshot_internal.h"

namespace qjsn {

namespace {

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

// How writing one value went: stored, or not storable (the caller writes a placeholder in its
// place and goes on), or failed so that the whole write stops (out of memory, over a cap).
enum class Written { Ok, Unstorable, Fatal };

class Writer {
 public:
  Writer(JSContext* ctx, const Intrinsics& in, const WireLimits& limits, WireWriter& out)
      : ctx_(ctx),
        in_(in),
        limits_(limits),
        out_(out),
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
  Written value(JSValueConst v, uint32_t depth);
  Written object(JSValueConst v, uint32_t depth);
  Written function(JSValueConst v, uint32_t depth);
  Written array(JSValueConst v, uint32_t depth);
  Written properties(JSValueConst obj, uint32_t depth);
  // Where the output stood, to take back a value that turned out not to be storable.
  struct Mark {
    size_t bytes, objects, report;
  };
  Mark mark() const { return {out_.size(), numbered_.size(), result_.notRestored.size()}; }
  void rollback(const Mark& m);
  Written slot(JSValueConst v, uint32_t depth);
  Written accessor(JSValueConst getter, JSValueConst setter, uint32_t depth);
  Written collection(JSValueConst v, bool isMap, uint32_t depth);
  Written typedArray(JSValueConst v, TypedKind kind, uint32_t depth);
  Written leaf(JSValueConst v);
  bool prototypeOwner(JSValueConst v, OwnedValue* owner);
  void placeholder(const std::string& type, Tag tag = Tag::Placeholder);
  bool atomKey(JSAtom atom);
  // What a shared walk's end means: the failure a callback returned, or else the engine's.
  Written walked(Walk result, Written status) {
    if (result == Walk::Done) return Written::Ok;
    return status != Written::Ok ? status : guestFailed();
  }
  void number(JSValueConst v) {
    ids_.emplace(JS_VALUE_GET_PTR(v), static_cast<uint32_t>(numbered_.size()));
    numbered_.push_back(JS_VALUE_GET_PTR(v));
  }
  Written unstorable(std::string type) {
    type_ = std::move(type);
    return Written::Unstorable;
  }
  Written fatal(SnapshotStatus status, std::string message) {
    result_.status = status;
    result_.message = std::move(message);
    return Written::Fatal;
  }
  Written guestFailed() { return fatal(SnapshotStatus::OutOfMemory, "the engine raised while writing the snapshot"); }
  std::string pathText();

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

// Property names repeat across records of one shape: each is converted once per snapshot.
bool Writer::atomKey(JSAtom atom) {
  auto cached = keys_.find(atom);
  if (cached != keys_.end()) {
    out_.raw(cached->second.data(), cached->second.size());
    return true;
  }
  size_t start = out_.size();
  if (writeAtomKey(ctx_, atom, out_) != Put::Ok) return false;
  keys_.emplace(JS_DupAtom(ctx_, atom),
                std::string(reinterpret_cast<const char*>(out_.bytes().data() + start), out_.size() - start));
  return true;
}

void Writer::placeholder(const std::string& type, Tag tag) {
  std::string name = pathText();
  out_.tag(tag);
  out_.latin1(type);
  OwnedValue text(ctx_, JS_NewStringLen(ctx_, name.data(), name.size()));
  if (text.isException() || writeString(ctx_, text.get(), out_) != Put::Ok) out_.latin1(name);
  result_.notRestored.push_back({name, type});
}

// A value in a place that can hold a placeholder (a property, an element, a global): when it
// cannot be stored, what was written of it is taken back and a placeholder takes its place.
Written Writer::slot(JSValueConst v, uint32_t depth) {
  Mark m = mark();
  Written r = value(v, depth);
  if (r != Written::Unstorable) return r;
  rollback(m);
  placeholder(type_);
  return Written::Ok;
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
Written Writer::accessor(JSValueConst getter, JSValueConst setter, uint32_t depth) {
  if (const PlaceholderInfo* carried = placeholderInfoOf(getter)) {
    placeholder(carried->type, Tag::ReportedPlaceholder);
    return Written::Ok;
  }
  Mark m = mark();
  out_.tag(Tag::Accessor);
  Written r = Written::Ok;
  for (JSValueConst f : {getter, setter}) {
    if (r != Written::Ok) break;
    if (JS_IsUndefined(f)) out_.tag(Tag::Undefined);
    else r = JS_IsFunction(ctx_, f) ? value(f, depth) : unstorable("accessor");
  }
  if (r != Written::Unstorable) return r;
  rollback(m);
  placeholder(type_ == "accessor" ? type_ : "accessor (" + type_ + ")");
  return Written::Ok;
}

Written Writer::value(JSValueConst v, uint32_t depth) {
  if (++nodes_ > limits_.maxNodes)
    return fatal(SnapshotStatus::TooLarge, "the state has more than " + std::to_string(limits_.maxNodes) + " values");
  if (out_.size() > limits_.maxBytes)
    return fatal(SnapshotStatus::TooLarge, "the state takes more than " + std::to_string(limits_.maxBytes) + " bytes");
  if (writeScalar(v, out_)) return Written::Ok;
  switch (JS_VALUE_GET_NORM_TAG(v)) {
    case JS_TAG_STRING:
    case JS_TAG_STRING_ROPE: return writeString(ctx_, v, out_) == Put::Ok ? Written::Ok : guestFailed();
    case JS_TAG_BIG_INT:
    case JS_TAG_SHORT_BIG_INT: return leaf(v);
    case JS_TAG_SYMBOL: return unstorable("symbol");
    case JS_TAG_OBJECT: return object(v, depth);
    default: return unstorable("unknown");
  }
}

// Date, RegExp, Error, ArrayBuffer and BigInt hold no other objects: the boundary codec writes them.
Written Writer::leaf(JSValueConst v) {
  GuestEncoder enc(ctx_, in_, out_, limits_, false);
  if (enc.encode(v)) return Written::Ok;
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

Written Writer::object(JSValueConst v, uint32_t depth) {
  auto seen = ids_.find(JS_VALUE_GET_PTR(v));
  if (seen != ids_.end()) {
    out_.tag(Tag::BackRef);
    out_.u32(seen->second);
    return Written::Ok;
  }
  if (depth >= limits_.maxDepth)
    return fatal(SnapshotStatus::TooLarge,
                 "the state is nested deeper than " + std::to_string(limits_.maxDepth) + " levels");
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
  TypedKind typed = typedKindOf(JS_GetTypedArrayType(v));
  if (typed != TypedKind::Count) {
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
    Written r = value(proto.get(), depth + 1);
    if (r != Written::Ok) return r;
  }
  return properties(v, depth);
}

Written Writer::function(JSValueConst v, uint32_t depth) {
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
  Written r = properties(v, depth);
  if (r != Written::Ok) return r;
  if (!JS_IsObject(proto.get()) || JS_IsProxy(proto.get()) || JS_GetClassID(proto.get()) != in_.objectClassId) {
    out_.u32(0);
    return Written::Ok;
  }
  path_.push_back({atomPrototype_.get(), 0});
  r = properties(proto.get(), depth);
  path_.pop_back();
  return r;
}

Written Writer::properties(JSValueConst obj, uint32_t depth) {
  Written status = Written::Ok;
  Walk result = walkProperties(ctx_, obj, out_, [&](JSAtom key, const OwnedDescriptor& d) {
    if (!atomKey(key)) {
      status = guestFailed();
      return false;
    }
    path_.push_back({key, 0});
    status = d.isAccessor() ? accessor(d.desc.getter, d.desc.setter, depth + 1) : slot(d.desc.value, depth + 1);
    path_.pop_back();
    return status == Written::Ok;
  });
  return walked(result, status);
}

Written Writer::array(JSValueConst v, uint32_t depth) {
  Written status = Written::Ok;
  Walk result = walkArray(ctx_, v, out_, [&](uint32_t index, const OwnedDescriptor& d) {
    path_.push_back({JS_ATOM_NULL, index});
    status = d.isAccessor() ? accessor(d.desc.getter, d.desc.setter, depth + 1) : slot(d.desc.value, depth + 1);
    path_.pop_back();
    return status == Written::Ok;
  });
  return walked(result, status);
}

// Entries are not slots, so an entry that cannot be stored makes the whole collection a
// placeholder.
Written Writer::collection(JSValueConst v, bool isMap, uint32_t depth) {
  Written status = Written::Ok;
  Walk result = walkCollection(ctx_, in_, v, isMap, out_, [&](JSValueConst entry, JSValueConst key) {
    status = isMap ? value(key, depth + 1) : Written::Ok;
    if (status == Written::Ok) status = value(entry, depth + 1);
    if (status == Written::Ok) return Step::Continue;
    // The engine's own exception (stack overflow, out of memory) travels up as it is.
    return status == Written::Fatal ? Step::Propagate : Step::Stop;
  });
  return walked(result, status);
}

Written Writer::typedArray(JSValueConst v, TypedKind kind, uint32_t depth) {
  size_t offset = 0, byteLength = 0, bpe = 1;
  OwnedValue buffer(ctx_, JS_GetTypedArrayBuffer(ctx_, v, &offset, &byteLength, &bpe));
  if (buffer.isException()) return guestFailed();
  out_.tag(Tag::TypedArray);
  out_.u8(static_cast<uint8_t>(kind));
  Written r = value(buffer.get(), depth + 1);
  if (r != Written::Ok) return r;
  out_.u32(static_cast<uint32_t>(offset));
  out_.u32(static_cast<uint32_t>(bpe ? byteLength / bpe : 0));
  return Written::Ok;
}

bool Writer::collect(JSValueConst holder, Binding defaultBinding, const std::unordered_set<std::u16string>& baseline,
                     const std::unordered_set<std::u16string>& exclude, OwnedPropertyEnum& keys,
                     std::vector<Entry>* entries) {
  if (!keys.load(holder, JS_GPN_STRING_MASK)) return false;
  // Built-in globals are most of the keys: told apart by atom (one name, one atom) when the
  // atoms could be made, else by name.
  const std::vector<JSAtom>& baselineAtoms = in_.baselineGlobalAtoms;
  bool byAtom = !baselineAtoms.empty();
  std::u16string name;
  for (uint32_t i = 0; i < keys.size(); i++) {
    if (defaultBinding == Binding::GlobalProperty) {
      if (byAtom && std::binary_search(baselineAtoms.begin(), baselineAtoms.end(), keys.atom(i))) continue;
      if (!byAtom || !exclude.empty()) {
        OwnedValue key(ctx_, JS_AtomToValue(ctx_, keys.atom(i)));
        GuestUtf16 u(ctx_, key.get());
        if (!u.ok()) return false;
        name.assign(reinterpret_cast<const char16_t*>(u.data()), u.size());
        if ((!byAtom && baseline.count(name)) || exclude.count(name)) continue;
      }
    }
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
    Written r = Written::Ok;
    r = e.accessor ? accessor(e.getter.get(), e.setter.get(), 0) : slot(e.value.get(), 0);
    if (r != Written::Ok) {
      if (result_.status == SnapshotStatus::Ok) guestFailed();
      takeEngineFailure(ctx_, &result_);
      return std::move(result_);
    }
  }
  return std::move(result_);
}

}  // namespace

SnapshotResult writeSnapshotBody(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits,
                                 const std::unordered_set<std::u16string>& baseline,
                                 const std::unordered_set<std::u16string>& exclude, WireWriter& out) {
  Writer w(ctx, intrinsics, limits, out);
  return w.run(baseline, exclude);
}

}  // namespace qjsn
