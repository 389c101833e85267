// A host service the guest can call but never replace (src/sandbox.ts defineFrozenAsyncFunction):
// a frozen host function installed as a read-only, non-enumerable, non-configurable global, built
// and defined through the C API alone. No JavaScript runs, so a guest that replaced Object.freeze,
// Object.defineProperty or Reflect never runs on the calling (Node main) thread.
#include "engine.h"

namespace qjsn {

namespace {

// Passes on only the one request argument, and no `this`, to the async host function `fnId`.
JSValue frozenServiceCall(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int fnId) {
  JSValueConst request = argc > 0 ? argv[0] : JS_UNDEFINED;
  return static_cast<Engine*>(JS_GetContextOpaque(ctx))->callHost(fnId, true, 1, &request);
}

}  // namespace

std::optional<NativeError> Engine::defineFrozenFunction(const std::string& name, uint32_t fnId, bool* installed) {
  *installed = false;
  if (!clampStack()) return NativeError{ErrorCode::StackOverflow, stackRefusal()};
  OwnedValue fn(ctx_, JS_NewCFunctionMagic(ctx_, frozenServiceCall, name.c_str(), 1, JS_CFUNC_generic_magic,
                                           static_cast<int>(fnId)));
  if (JS_IsException(fn.get()) || JS_FreezeObject(ctx_, fn.get()) < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return NativeError{ErrorCode::OutOfMemory, "out of memory"};
  }
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedAtom atom(ctx_, JS_NewAtomLen(ctx_, name.data(), name.size()));
  // Without JS_PROP_THROW a property the guest made non-configurable (or a non-extensible global)
  // refuses with 0 and no exception: that guest keeps its own global.
  int defined = JS_DefinePropertyValue(ctx_, global.get(), atom.get(), JS_DupValue(ctx_, fn.get()), 0);
  if (defined < 0) {
    JS_FreeValue(ctx_, JS_GetException(ctx_));
    return NativeError{ErrorCode::OutOfMemory, "out of memory"};
  }
  *installed = defined == 1;
  return std::nullopt;
}

}  // namespace qjsn
