// Globals the host defines and reads while no eval runs: host functions at dotted paths, values
// set and read through the codec, and the list of global names.
#include "engine.h"

namespace qjsn {

namespace {

// Walks (creating plain objects as needed) to the parent of the last path segment.
bool parentOf(JSContext* ctx, const std::string& path, OwnedValue* parent, std::string* leaf, std::string* error) {
  *parent = OwnedValue(ctx, JS_GetGlobalObject(ctx));
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string seg = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      *leaf = seg;
      return true;
    }
    OwnedAtom atom(ctx, JS_NewAtomLen(ctx, seg.data(), seg.size()));
    OwnedDescriptor d(ctx);
    int r = d.load(parent->get(), atom.get());
    if (r < 0) {
      JS_FreeValue(ctx, JS_GetException(ctx));
      *error = "cannot read '" + seg + "'";
      return false;
    }
    if (r == 1 && !d.isAccessor() && JS_IsObject(d.desc.value) && !JS_IsProxy(d.desc.value)) {
      *parent = OwnedValue::dup(ctx, d.desc.value);
    } else if (r == 1) {
      *error = "'" + seg + "' exists and is not a plain object";
      return false;
    } else {
      OwnedValue obj(ctx, JS_NewObject(ctx));
      if (JS_DefinePropertyValue(ctx, parent->get(), atom.get(), JS_DupValue(ctx, obj.get()),
                                 JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE) < 0) {
        JS_FreeValue(ctx, JS_GetException(ctx));
        *error = "cannot define '" + seg + "'";
        return false;
      }
      *parent = std::move(obj);
    }
    start = dot + 1;
  }
}

}  // namespace

std::optional<NativeError> Engine::defineFunction(const std::string& path, uint32_t fnId, bool async) {
  if (!clampStack()) return NativeError{ErrorCode::StackOverflow, stackRefusal()};
  OwnedValue parent;
  std::string leaf, error;
  if (!parentOf(ctx_, path, &parent, &leaf, &error)) return NativeError{ErrorCode::InvalidArgument, error};
  JSValue data[1] = {JS_NewBool(ctx_, async)};
  JSValue fn = JS_NewCFunctionData2(ctx_, hostTrampoline, leaf.c_str(), 0, static_cast<int>(fnId), 1, data);
  if (JS_IsException(fn)) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return NativeError{ErrorCode::OutOfMemory, "out of memory"};
  }
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, leaf.data(), leaf.size()));
  // Enumerable, so `Object.keys(tools)` lists what a namespace of host functions offers.
  if (JS_DefinePropertyValue(ctx_, parent.get(), atom.get(), fn, JS_PROP_C_W_E) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return NativeError{ErrorCode::InvalidArgument, "cannot define '" + leaf + "'"};
  }
  return std::nullopt;
}

std::optional<NativeError> Engine::setGlobal(const std::string& name, const uint8_t* data, size_t size) {
  if (!clampStack()) return NativeError{ErrorCode::StackOverflow, stackRefusal()};
  WireReader reader(data, size);
  GuestDecoder dec(ctx_, intrinsics_, limits_);
  JSValue v = dec.decode(reader);
  if (JS_IsException(v)) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    // The decoder's own refusals (caps, malformed bytes) say what; anything else the engine raised.
    const CodecError& e = dec.error();
    if (e.status == CodecStatus::TooLarge || e.status == CodecStatus::InvalidData)
      return NativeError{ErrorCode::Unserializable, e.message};
    return NativeError{ErrorCode::OutOfMemory, e.message.empty() ? std::string("out of memory") : e.message};
  }
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, name.data(), name.size()));
  if (JS_DefinePropertyValue(ctx_, global.get(), atom.get(), v, JS_PROP_C_W_E) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return NativeError{ErrorCode::OutOfMemory, "cannot define global '" + name + "'"};
  }
  return std::nullopt;
}

std::optional<NativeError> Engine::getGlobal(const std::string& name, std::vector<uint8_t>* out) {
  if (!clampStack()) return NativeError{ErrorCode::StackOverflow, stackRefusal()};
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, name.data(), name.size()));
  OwnedDescriptor d(ctx_);
  int r = d.load(global.get(), atom.get());
  WireWriter w;
  if (r < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return NativeError{ErrorCode::Unserializable, "cannot read global '" + name + "'"};
  }
  if (r == 0) {
    w.tag(Tag::Undefined);
  } else if (d.isAccessor()) {
    return NativeError{ErrorCode::Unserializable, "global '" + name + "' is an accessor; getters are never run"};
  } else {
    GuestEncoder enc(ctx_, intrinsics_, w, limits_, false);
    if (!enc.encode(d.desc.value)) {
      if (enc.error().status == CodecStatus::GuestException) JS_FreeValue(ctx_, JS_GetException(ctx_));
      const CodecError& e = enc.error();
      return NativeError{ErrorCode::Unserializable, "global '" + name + "'" + e.path + ": " + e.message};
    }
  }
  *out = std::move(w.bytes());
  return std::nullopt;
}

std::vector<std::string> Engine::globalNames(size_t limit) {
  std::vector<std::string> names;
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  JSPropertyEnum* props = nullptr;
  uint32_t count = 0;
  if (JS_GetOwnPropertyNames(ctx_, &props, &count, global.get(), JS_GPN_STRING_MASK) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));  // out of memory: no names
    return names;
  }
  for (uint32_t i = 0; i < count && names.size() < limit; i++) {
    size_t length = 0;
    const char* name = JS_AtomToCStringLen(ctx_, &length, props[i].atom);
    if (!name) {
      JS_FreeValue(ctx_, JS_GetException(ctx_));
      break;
    }
    names.emplace_back(name, length);
    JS_FreeCString(ctx_, name);
  }
  JS_FreePropertyEnum(ctx_, props, count);
  return names;
}

}  // namespace qjsn
