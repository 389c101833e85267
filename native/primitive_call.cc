// The fast path of a sync host call on the main thread (SandboxHandle::syncCallPrimitive in
// native/sandbox_handle.h): one call of the primitive dispatcher of src/host-calls.ts.
#include "primitive_call.h"

namespace qjsn {

bool callPrimitiveDispatcher(napi_env env, PrimitiveDispatcher d, PrimitiveCall* call, EnvBridge& bridge) {
  static_assert(kMaxPrimitiveArgs == 3, "argc and the number bits share the call slot with fnId");
  static_assert(static_cast<uint32_t>(PrimitiveSlot::arg2) == static_cast<uint32_t>(PrimitiveSlot::arg0) + 2);
  // Numbers, the common case, cross through the shared slots: making a JS value or reading one
  // costs a Node-API call each. The other arguments are JS values; the dispatcher always gets all
  // three (a call with fewer than the callee declares costs V8 a step on every entry).
  const int argc = call->argc;
  uint32_t numberBits = 0;
  napi_value argv[kMaxPrimitiveArgs];
  for (int i = 0; i < kMaxPrimitiveArgs; i++) {
    napi_value& v = argv[i];
    v = d.undefined;
    if (i >= argc) continue;
    const Primitive& a = call->args[i];
    switch (a.kind) {
      case Primitive::Kind::Undefined: break;
      case Primitive::Kind::Null: napi_get_null(env, &v); break;
      case Primitive::Kind::Boolean: napi_get_boolean(env, a.number != 0, &v); break;
      case Primitive::Kind::Number:
        bridge.primitiveSlot(static_cast<PrimitiveSlot>(static_cast<uint32_t>(PrimitiveSlot::arg0) + i)) = a.number;
        numberBits |= 1u << i;
        break;
      case Primitive::Kind::Utf8: napi_create_string_utf8(env, static_cast<const char*>(a.chars), a.length, &v); break;
      case Primitive::Kind::Utf16:
        napi_create_string_utf16(env, static_cast<const char16_t*>(a.chars), a.length, &v);
        break;
    }
  }
  bridge.primitiveSlot(PrimitiveSlot::call) = static_cast<double>(call->fnId) * 32 + numberBits * 4 + argc;
  double& hasResult = bridge.primitiveSlot(PrimitiveSlot::hasResult);
  hasResult = 0;
  napi_value ret;
  if (napi_call_function(env, d.undefined, d.dispatcher, kMaxPrimitiveArgs, argv, &ret) != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
    HostResult& failed = call->fallback.emplace();
    failed.ok = false;
    failed.errorMessage = "host function failed";
    return false;
  }
  Primitive* result = &call->result;
  if (hasResult != 0) {  // the usual answer
    hasResult = 0;
    result->kind = Primitive::Kind::Number;
    result->number = bridge.primitiveSlot(PrimitiveSlot::result);
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
      napi_get_value_string_utf16(env, ret, call->text, length + 1, &length);  // and the terminator
      result->kind = Primitive::Kind::Utf16;
      result->chars = call->text;
      result->length = length;
      return true;
    }
    default: break;
  }
  Napi::Array a = Napi::Value(env, ret).As<Napi::Array>();
  HostResult* fallback = &call->fallback.emplace();
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
