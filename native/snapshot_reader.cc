// The snapshot body reader: defines each global as it is read. The shared value builder
// (value_walk.h) makes every value both formats share; this file reads what only snapshots hold
// (functions and classes from source, instances, accessors, placeholders) and the envelope.
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "snapshot_internal.h"

namespace qjsn {

namespace {

// Assigning to a placeholder replaces it with an ordinary data property.
JSValue replaceNotRestored(JSContext* ctx, JSValueConst self, int argc, JSValueConst* argv, int, JSValueConst* data) {
  if (!JS_IsObject(self)) return JS_UNDEFINED;
  OwnedAtom key(ctx, JS_ValueToAtom(ctx, data[0]));
  if (key.get() == JS_ATOM_NULL) return JS_EXCEPTION;
  JSValue v = argc > 0 ? JS_DupValue(ctx, argv[0]) : JS_UNDEFINED;
  if (JS_DefinePropertyValue(ctx, self, key.get(), v, JS_PROP_C_W_E) < 0) return JS_EXCEPTION;
  return JS_UNDEFINED;
}

class Reader : ValueBuilder {
 public:
  Reader(JSContext* ctx, const Intrinsics& in, const WireLimits& limits, const uint8_t* data, size_t size)
      : ValueBuilder(ctx, in, limits),
        base_(data),
        size_(size),
        rd_(data, size),
        atomPrototype_(ctx, JS_NewAtom(ctx, "prototype")) {}
  ~Reader() override {
    for (auto& [raw, atom] : keyAtoms_) JS_FreeAtom(ctx_, atom);
  }

  SnapshotResult run();

 private:
  // A value that could not be re-created, reported at the nearest slot.
  struct Failure {
    std::string type;
  };

  JSValue value(uint32_t depth, bool slot);
  JSValue readChild(WireReader&, uint32_t depth) override { return value(depth, false); }
  bool readElement(WireReader&, JSValueConst array, uint32_t index, uint32_t depth) override;
  JSValue lostObject() override {
    failure_ = Failure{"function whose source did not evaluate"};
    return JS_UNDEFINED;
  }
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
  JSValue invalid(const char* what) override {
    if (result_.status == SnapshotStatus::Ok) {
      result_.status = SnapshotStatus::Invalid;
      result_.message = std::string("malformed snapshot: ") + what;
    }
    return JS_EXCEPTION;
  }
  JSValue guestFailed() override {
    if (result_.status == SnapshotStatus::Ok) {
      result_.status = SnapshotStatus::OutOfMemory;
      result_.message = "the engine raised while restoring the snapshot";
    }
    return JS_EXCEPTION;
  }
  static bool fail(JSValue) { return false; }

  const uint8_t* base_;
  size_t size_;
  WireReader rd_;
  OwnedAtom atomPrototype_;
  // objects_ (ValueBuilder): JS_NULL marks a function that did not re-create.
  // Path segments as wire bytes of a name, or "[index]" text (prefixed by a NUL byte).
  std::vector<std::string_view> path_;
  std::deque<std::string> indexTexts_;                     // a deque: growing it keeps earlier texts in place
  std::unordered_map<std::string_view, JSAtom> keyAtoms_;  // counted atoms
  uint32_t nodes_ = 0;
  // Set by a value that could not be re-created or a placeholder, taken by the enclosing slot.
  std::optional<Failure> failure_;
  struct PendingPlaceholder {
    std::string type, name;
    bool reported;  // carried over from an earlier restore, which listed it
  };
  std::optional<PendingPlaceholder> placeholder_;
  std::optional<std::pair<OwnedValue, OwnedValue>> accessor_;  // (getter, setter)
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
  OwnedValue getter(ctx_, newPlaceholderGetter(ctx_, name, type));
  if (getter.isException()) return false;
  OwnedValue keyValue(ctx_, JS_AtomToValue(ctx_, key));
  if (keyValue.isException()) return false;
  JSValue keyData[1] = {keyValue.get()};
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
  Tag tag;
  if (!rd_.tag(&tag)) return invalid("truncated");
  switch (tag) {
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
        if (!JS_IsUndefined(f) && !JS_IsFunction(ctx_, f) && !failure_)
          return invalid("accessor that is not a function");
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
    default: return readShared(rd_, tag, depth);
  }
}

bool Reader::readElement(WireReader&, JSValueConst array, uint32_t index, uint32_t depth) {
  OwnedAtom atom(ctx_, JS_NewAtomUInt32(ctx_, index));
  if (atom.get() == JS_ATOM_NULL) return fail(guestFailed());
  indexTexts_.push_back(std::string(1, '\0') + "[" + std::to_string(index) + "]");
  bool ok = slotValue(array, atom.get(), indexTexts_.back(), depth);
  indexTexts_.pop_back();
  return ok;
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
      ok = JS_DefineProperty(
          ctx_, global.get(), atom, v, JS_UNDEFINED, JS_UNDEFINED,
          flags | JS_PROP_HAS_VALUE | JS_PROP_HAS_CONFIGURABLE | JS_PROP_HAS_WRITABLE | JS_PROP_HAS_ENUMERABLE);
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

SnapshotResult readSnapshotBody(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits,
                                const uint8_t* data, size_t size) {
  Reader r(ctx, intrinsics, limits, data, size);
  return r.run();
}

}  // namespace qjsn
