#include "realm.h"

namespace qjsn {

namespace {

// Globals a sandbox does without:
// - Atomics, SharedArrayBuffer: no other thread to share with; a recurring CVE class
//   (Atomics on resizable buffers, CVE-2026-1144).
// - WeakRef, FinalizationRegistry: make garbage-collection timing observable (runs stop being
//   reproducible) and run finalizer callbacks as jobs whenever the collector decides, which can
//   be inside a later eval; engines have had use-after-free bugs here; agent code has no need.
constexpr const char* kRemovedGlobals[] = {"Atomics", "SharedArrayBuffer", "WeakRef", "FinalizationRegistry"};

// Error.prepareStackTrace installs a guest function that the engine calls whenever an Error is
// constructed, including Errors the addon itself creates outside any eval budget (copying a host
// Error in with setGlobal, reporting a hung eval): guest code would run with no deadline, on the
// Node main thread for setGlobal. Stacks still work; only the hook is gone.
constexpr const char* kRemovedErrorStatics[] = {"prepareStackTrace"};

bool removeOwn(JSContext* ctx, JSValueConst obj, const char* name) {
  OwnedAtom atom(ctx, JS_NewAtom(ctx, name));
  if (atom.get() == JS_ATOM_NULL) return false;
  int r = JS_DeleteProperty(ctx, obj, atom.get(), 0);
  if (r < 0) JS_FreeValue(ctx, JS_GetException(ctx));
  if (r != 1) return false;
  return JS_HasProperty(ctx, obj, atom.get()) == 0;
}

}  // namespace

bool trimRealm(JSContext* ctx) {
  OwnedValue global(ctx, JS_GetGlobalObject(ctx));
  for (const char* name : kRemovedGlobals) {
    if (!removeOwn(ctx, global.get(), name)) return false;
  }
  OwnedValue error(ctx, JS_GetPropertyStr(ctx, global.get(), "Error"));
  if (!JS_IsObject(error.get())) return false;
  for (const char* name : kRemovedErrorStatics) {
    if (!removeOwn(ctx, error.get(), name)) return false;
  }
  return true;
}

}  // namespace qjsn
