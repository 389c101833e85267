// The fast path of a sync host call on the main thread (SandboxHandle::syncCallPrimitive in
// native/addon.cc): one call of the primitive dispatcher of src/host-calls.ts.
#include "primitive_call.h"

namespace qjsn {

bool callPrimitiveDispatcher(napi_env env, PrimitiveDispatcher d, uint32_t fnId, const Primitive* args, int argc,
                             Primitive* result, char16_t* text, HostResult* fallback, EnvBridge& bridge) {
  static_assert(kMaxPrimitiveArgs < 4, "argc shares a number with fnId");
  napi_value argv[1 + kMaxPrimitiveArgs];
  // `call` (src/native.ts). Small integers (V8 Smis) are made without entering the VM: the key and
  // an int argument, the common case, cost less than a double.
  if (fnId < (1u << 30))
    napi_create_uint32(env, fnId * 4 + static_cast<uint32_t>(argc), &argv[0]);
  else
    napi_create_double(env, static_cast<double>(fnId) * 4 + argc, &argv[0]);
  // The dispatcher always gets all its parameters: a call with fewer arguments than the callee
  // declares costs V8 a step on every entry.
  for (int i = argc; i < kMaxPrimitiveArgs; i++) argv[1 + i] = d.undefined;
  for (int i = 0; i < argc; i++) {
    napi_value& v = argv[1 + i];
    const Primitive& a = args[i];
    switch (a.kind) {
      case Primitive::Kind::Undefined: v = d.undefined; break;
      case Primitive::Kind::Null: napi_get_null(env, &v); break;
      case Primitive::Kind::Boolean: napi_get_boolean(env, a.number != 0, &v); break;
      case Primitive::Kind::Number: napi_create_double(env, a.number, &v); break;
      case Primitive::Kind::Int32: napi_create_int32(env, static_cast<int32_t>(a.number), &v); break;
      case Primitive::Kind::Utf8: napi_create_string_utf8(env, static_cast<const char*>(a.chars), a.length, &v); break;
      case Primitive::Kind::Utf16:
        napi_create_string_utf16(env, static_cast<const char16_t*>(a.chars), a.length, &v);
        break;
    }
  }
  napi_value ret;
  if (napi_call_function(env, d.undefined, d.dispatcher, 1 + kMaxPrimitiveArgs, argv, &ret) != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
    fallback->ok = false;
    fallback->errorMessage = "host function failed";
    return false;
  }
  if (napi_get_value_double(env, ret, &result->number) == napi_ok) {  // the usual answer: one call
    result->kind = Primitive::Kind::Number;
    return true;
  }
  napi_valuetype type;
  napi_typeof(env, ret, &type);
  switch (type) {
    case napi_undefined: result->kind = Primitive::Kind::Undefined; return true;
    case napi_null: result->kind = Primitive::Kind::Null; return true;
    case napi_boolean: {
      bool b = false;
      napi_get_value_bool(env, ret, &b);
      result->kind = Primitive::Kind::Boolean;
      result->number = b;
      return true;
    }
    case napi_string: {
      // The dispatcher answers strings of at most kMaxPrimitiveChars units (src/host-calls.ts).
      size_t length = 0;
      napi_get_value_string_utf16(env, ret, nullptr, 0, &length);
      if (length > kMaxPrimitiveChars) break;
      napi_get_value_string_utf16(env, ret, text, length + 1, &length);  // and the terminator
      result->kind = Primitive::Kind::Utf16;
      result->chars = text;
      result->length = length;
      return true;
    }
    default: break;
  }
  Napi::Array a = Napi::Value(env, ret).As<Napi::Array>();
  if (a.IsArray() && a.Length() == 1) {
    fallback->value = bridge.resultBytes(a.Get(0u));
    return false;
  }
  fallback->ok = false;
  if (a.IsArray() && a.Length() == 2) {
    fallback->errorName = a.Get(0u).ToString().Utf8Value();
    fallback->errorMessage = a.Get(1u).ToString().Utf8Value();
  }
  return false;
}

}  // namespace qjsn
