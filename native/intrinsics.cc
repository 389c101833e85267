#include "intrinsics.h"

#include <algorithm>

namespace qjsn {

namespace {

OwnedValue globalProp(JSContext* ctx, const char* name) {
  OwnedValue global(ctx, JS_GetGlobalObject(ctx));
  return OwnedValue(ctx, JS_GetPropertyStr(ctx, global.get(), name));
}

OwnedValue protoProp(JSContext* ctx, JSValueConst ctor, const char* name) {
  OwnedValue proto(ctx, JS_GetPropertyStr(ctx, ctor, "prototype"));
  return OwnedValue(ctx, JS_GetPropertyStr(ctx, proto.get(), name));
}

OwnedValue protoGetter(JSContext* ctx, JSValueConst ctor, const char* name) {
  OwnedValue proto(ctx, JS_GetPropertyStr(ctx, ctor, "prototype"));
  OwnedAtom atom(ctx, JS_NewAtom(ctx, name));
  OwnedDescriptor d(ctx);
  if (d.load(proto.get(), atom.get()) != 1 || !d.isAccessor()) return OwnedValue(ctx, JS_UNDEFINED);
  return OwnedValue::dup(ctx, d.desc.getter);
}

bool isFn(JSContext* ctx, const OwnedValue& v) { return JS_IsFunction(ctx, v.get()); }

}  // namespace

bool Intrinsics::load(JSContext* ctx) {
  mapCtor = globalProp(ctx, "Map");
  mapSet = protoProp(ctx, mapCtor.get(), "set");
  mapForEach = protoProp(ctx, mapCtor.get(), "forEach");
  setCtor = globalProp(ctx, "Set");
  setAdd = protoProp(ctx, setCtor.get(), "add");
  setForEach = protoProp(ctx, setCtor.get(), "forEach");
  sizeGetters[0] = protoGetter(ctx, mapCtor.get(), "size");
  sizeGetters[1] = protoGetter(ctx, setCtor.get(), "size");
  OwnedValue dateCtor = globalProp(ctx, "Date");
  dateGetTime = protoProp(ctx, dateCtor.get(), "getTime");
  regexpCtor = globalProp(ctx, "RegExp");
  regexpSource = protoGetter(ctx, regexpCtor.get(), "source");
  bool ok = isFn(ctx, mapCtor) && isFn(ctx, mapSet) && isFn(ctx, mapForEach) && isFn(ctx, setCtor) && isFn(ctx, setAdd) &&
            isFn(ctx, setForEach) && isFn(ctx, dateGetTime) && isFn(ctx, regexpCtor) && isFn(ctx, regexpSource);
  for (auto& getter : sizeGetters) ok = ok && isFn(ctx, getter);
  for (int i = 0; i < 8; i++) {
    regexpFlagGetters[i] = protoGetter(ctx, regexpCtor.get(), kFlagNames[i]);
    ok = ok && isFn(ctx, regexpFlagGetters[i]);
  }
  bigintCtor = globalProp(ctx, "BigInt");
  bigintToString = protoProp(ctx, bigintCtor.get(), "toString");
  bigintAsIntN = OwnedValue(ctx, JS_GetPropertyStr(ctx, bigintCtor.get(), "asIntN"));
  dataViewCtor = globalProp(ctx, "DataView");
  dataViewBuffer = protoGetter(ctx, dataViewCtor.get(), "buffer");
  dataViewByteOffset = protoGetter(ctx, dataViewCtor.get(), "byteOffset");
  dataViewByteLength = protoGetter(ctx, dataViewCtor.get(), "byteLength");
  OwnedValue uint8Array = globalProp(ctx, "Uint8Array");
  OwnedValue typedArray(ctx, JS_GetPrototype(ctx, uint8Array.get()));
  typedArrayLength = protoGetter(ctx, typedArray.get(), "length");
  ok = ok && isFn(ctx, typedArrayLength) && isFn(ctx, bigintCtor) && isFn(ctx, bigintToString) &&
       isFn(ctx, bigintAsIntN) && isFn(ctx, dataViewCtor) && isFn(ctx, dataViewBuffer) &&
       isFn(ctx, dataViewByteOffset) && isFn(ctx, dataViewByteLength);
  for (int i = 0; i < static_cast<int>(ErrorCtor::Count); i++) {
    errorCtors[i] = globalProp(ctx, kErrorNames[i]);
    ok = ok && isFn(ctx, errorCtors[i]);
  }
  errorStack = protoGetter(ctx, errorCtors[0].get(), "stack");
  ok = ok && isFn(ctx, errorStack);
  OwnedValue plain(ctx, JS_NewObject(ctx));
  objectClassId = JS_GetClassID(plain.get());
  objectProto = OwnedValue(ctx, JS_GetPrototype(ctx, plain.get()));
  ok = ok && JS_IsObject(objectProto.get());
  return ok;
}

void Intrinsics::holdBaselineGlobals(JSContext* ctx, const std::vector<std::string>& names) {
  atomsCtx_ = ctx;
  baselineGlobalAtoms.reserve(names.size());
  for (const std::string& name : names) {
    JSAtom atom = JS_NewAtomLen(ctx, name.data(), name.size());
    if (atom == JS_ATOM_NULL) {
      JS_FreeValue(ctx, JS_GetException(ctx));
      clearBaselineGlobals();
      return;
    }
    baselineGlobalAtoms.push_back(atom);
  }
  std::sort(baselineGlobalAtoms.begin(), baselineGlobalAtoms.end());
}

void Intrinsics::clearBaselineGlobals() {
  for (JSAtom atom : baselineGlobalAtoms) JS_FreeAtom(atomsCtx_, atom);
  baselineGlobalAtoms.clear();
}

void Intrinsics::clear() {
  clearBaselineGlobals();
  OwnedValue* all[] = {&mapCtor,          &mapSet,         &mapForEach,         &setCtor,
                       &setAdd,           &setForEach,     &dateGetTime,        &regexpCtor,
                       &regexpSource,     &bigintCtor,     &bigintToString,     &bigintAsIntN,
                       &dataViewCtor,     &dataViewBuffer, &dataViewByteOffset, &dataViewByteLength,
                       &typedArrayLength, &errorStack,     &objectProto};
  for (OwnedValue* v : all) v->reset();
  for (auto& v : sizeGetters) v.reset();
  for (auto& v : regexpFlagGetters) v.reset();
  for (auto& v : errorCtors) v.reset();
}

}  // namespace qjsn
