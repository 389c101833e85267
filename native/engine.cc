// The runtime and context of one sandbox: allocation accounting, the realm the guest gets, and
// freeing it all (teardown, dispose).
#include "engine.h"

#include <cstdlib>

#include "platform.h"
#include "realm.h"

namespace qjsn {

using Phase = EvalLifecycle::Phase;
using Event = EvalLifecycle::Event;

namespace {

// Allocation hooks: the engine enforces the limit itself; these keep a cheap usage and peak
// count per sandbox for stats and for telling out-of-memory from a guest `throw null`.
size_t usableSize(const void* p) { return platform::mallocUsableSize(const_cast<void*>(p)); }

void account(void* opaque, ptrdiff_t delta) {
  auto* m = static_cast<MemoryCounter*>(opaque);
  size_t now = m->used.fetch_add(static_cast<size_t>(delta), std::memory_order_relaxed) + static_cast<size_t>(delta);
  if (delta > 0 && now > m->peak.load(std::memory_order_relaxed)) m->peak.store(now, std::memory_order_relaxed);
}

void* hookCalloc(void* opaque, size_t count, size_t size) {
  void* p = calloc(count, size);
  if (p) account(opaque, static_cast<ptrdiff_t>(usableSize(p)));
  return p;
}

void* hookMalloc(void* opaque, size_t size) {
  void* p = malloc(size);
  if (p) account(opaque, static_cast<ptrdiff_t>(usableSize(p)));
  return p;
}

void hookFree(void* opaque, void* ptr) {
  if (!ptr) return;
  account(opaque, -static_cast<ptrdiff_t>(usableSize(ptr)));
  free(ptr);
}

void* hookRealloc(void* opaque, void* ptr, size_t size) {
  size_t old = usableSize(ptr);
  if (size == 0) {
    hookFree(opaque, ptr);
    return nullptr;
  }
  void* p = realloc(ptr, size);
  if (!p) return nullptr;
  account(opaque, static_cast<ptrdiff_t>(usableSize(p)) - static_cast<ptrdiff_t>(old));
  return p;
}

const JSMallocFunctions kMallocHooks = {hookCalloc, hookMalloc, hookFree, hookRealloc, usableSize};

int interruptHandler(JSRuntime*, void* opaque) { return static_cast<Engine*>(opaque)->onInterrupt(); }

}  // namespace

Engine::Engine(uint32_t id, const EngineOptions& options, std::shared_ptr<HostBridge> bridge)
    : id_(id), options_(options), bridge_(std::move(bridge)) {
  rt_ = JS_NewRuntime2(&kMallocHooks, &memory_);
  if (!rt_) return;
  JS_SetRuntimeOpaque(rt_, this);
  JS_SetMemoryLimit(rt_, options_.memoryLimitBytes);
  JS_SetMaxStackSize(rt_, options_.maxStackSizeBytes);
  JS_SetInterruptHandler(rt_, interruptHandler, this);
  creationFailure_ = {ErrorCode::OutOfMemory, "could not allocate the sandbox's context"};
  JSContext* ctx = JS_NewContextRaw(rt_);
  // No `performance` (a real high-resolution clock) and no module loader: see SECURITY.md.
  if (!ctx || JS_AddIntrinsicBaseObjects(ctx) || JS_AddIntrinsicDate(ctx) || JS_AddIntrinsicEval(ctx) ||
      JS_AddIntrinsicRegExp(ctx) || JS_AddIntrinsicJSON(ctx) || JS_AddIntrinsicProxy(ctx) ||
      JS_AddIntrinsicMapSet(ctx) || JS_AddIntrinsicTypedArrays(ctx) || JS_AddIntrinsicPromise(ctx) ||
      JS_AddIntrinsicBigInt(ctx) || JS_AddIntrinsicWeakRef(ctx)) {
    if (ctx) creationFailure_ = realmFailure(ctx);
    if (ctx) JS_FreeContext(ctx);
    JS_FreeRuntime(rt_);
    rt_ = nullptr;
    return;
  }
  ctx_ = ctx;
  JS_SetContextOpaque(ctx_, this);
  if (!intrinsics_.load(ctx_) || !trimRealm(ctx_)) {
    creationFailure_ = realmFailure(ctx_);
    teardown();
    return;
  }
  installConsole();
}

Engine::~Engine() { teardown(); }

NativeError Engine::realmFailure(JSContext* ctx) {
  OwnedValue exception(ctx, JS_GetException(ctx));
  // Nothing of the guest exists yet: reading the engine's own error runs no guest code.
  std::string why;
  if (!JS_IsNull(exception.get())) {
    if (const char* text = JS_ToCString(ctx, exception.get())) {
      why = text;
      JS_FreeCString(ctx, text);
    } else {
      JS_FreeValue(ctx, JS_GetException(ctx));
    }
  }
  if (why.empty() || why.find("out of memory") != std::string::npos)
    return {ErrorCode::OutOfMemory, "the memory limit (" + std::to_string(options_.memoryLimitBytes) +
                                        " bytes) is too small to create the sandbox's realm"};
  if (why.find("stack overflow") != std::string::npos)
    return {ErrorCode::StackOverflow, "the calling thread has too little stack left to create a sandbox"};
  return {ErrorCode::Broken, "could not create the sandbox's realm: " + why};
}

void Engine::teardown() {
  if (!rt_) return;
  if (ctx_) {
    JS_UpdateStackTop(rt_);
    clearEvalState();
    JS_DropPendingJobs(rt_);
    intrinsics_.clear();
    JS_FreeContext(ctx_);
    ctx_ = nullptr;
  }
  JS_FreeRuntime(rt_);
  rt_ = nullptr;
}

Engine::AfterDispose Engine::dispose() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_.exchange(static_cast<int>(StopReason::Dispose)) == 0) stopRequestedNs_ = monotonicNs();
  bool parked = lifecycle_.phase() == Phase::Parked;
  if (!lifecycle_.apply(Event::DisposeRequested)) return AfterDispose::Nothing;
  if (lifecycle_.phase() == Phase::Closed) return AfterDispose::Release;
  return parked ? AfterDispose::Schedule : AfterDispose::Nothing;
}

}  // namespace qjsn
