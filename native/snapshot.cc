// Snapshot bodies: the parts the writer (snapshot_writer.cc) and reader (snapshot_reader.cc)
// share, and the Engine's entry points.
#include "snapshot.h"

#include <mutex>

#include "engine.h"
#include "snapshot_internal.h"

namespace qjsn {

std::string notRestoredMessage(const std::string& name, const std::string& type) {
  return "Value for '" + name + "' was not restored because it is not serializable (type: " + type + ").";
}

namespace {

// A placeholder's getter is an object of its own callable class whose opaque says what was lost:
// a later snapshot recognises it (guest code cannot forge the class or read the opaque) and
// writes the placeholder back with its first type, marked as already reported.
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

}  // namespace

const PlaceholderInfo* placeholderInfoOf(JSValueConst getter) {
  if (placeholderClassId == 0 || JS_GetClassID(getter) != placeholderClassId) return nullptr;
  return static_cast<const PlaceholderInfo*>(JS_GetOpaque(getter, placeholderClassId));
}

JSValue newPlaceholderGetter(JSContext* ctx, const std::string& name, const std::string& type) {
  JSRuntime* rt = JS_GetRuntime(ctx);
  std::call_once(placeholderClassIdOnce, [rt] { JS_NewClassID(rt, &placeholderClassId); });
  if (!JS_IsRegisteredClass(rt, placeholderClassId) && JS_NewClass(rt, placeholderClassId, &kPlaceholderClass) < 0)
    return JS_EXCEPTION;
  OwnedValue getter(ctx, JS_NewObjectProtoClass(ctx, OwnedValue(ctx, JS_GetFunctionProto(ctx)).get(), placeholderClassId));
  if (getter.isException()) return JS_EXCEPTION;
  JS_SetOpaque(getter.get(), new PlaceholderInfo{name, type});
  return getter.release();
}

OwnedValue ownData(JSContext* ctx, JSValueConst obj, JSAtom name) {
  OwnedDescriptor d(ctx);
  int r = d.load(obj, name);
  if (r < 0) JS_FreeValue(ctx, JS_GetException(ctx));
  if (r != 1 || d.isAccessor()) return OwnedValue(ctx, JS_UNDEFINED);
  return OwnedValue::dup(ctx, d.desc.value);
}

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

// ---------------------------------------------------------------------------------------------
// Engine entry points

namespace {

// The global names every fresh sandbox has, read once from a throwaway engine, so a snapshot
// stores only what guest code (or setGlobal) added; in UTF-8 too, to make their atoms.
struct BaselineGlobals {
  std::unordered_set<std::u16string> names;
  std::vector<std::string> utf8;
};

const BaselineGlobals& baselineGlobals(const EngineOptions& options) {
  static const BaselineGlobals baseline = [&options] {
    BaselineGlobals out;
    Engine fresh(0, options, nullptr);
    JSContext* ctx = fresh.context();
    if (!ctx) return out;
    OwnedValue global(ctx, JS_GetGlobalObject(ctx));
    OwnedPropertyEnum keys(ctx);
    if (!keys.load(global.get(), JS_GPN_STRING_MASK)) return out;
    for (uint32_t i = 0; i < keys.size(); i++) {
      OwnedValue key(ctx, JS_AtomToValue(ctx, keys.atom(i)));
      GuestUtf16 u(ctx, key.get());
      if (!u.ok()) continue;
      out.names.emplace(reinterpret_cast<const char16_t*>(u.data()), u.size());
      out.utf8.push_back(utf8Of(ctx, key.get()));
    }
    return out;
  }();
  return baseline;
}

}  // namespace

SnapshotResult Engine::writeSnapshot(const std::unordered_set<std::u16string>& exclude, uint64_t maxBytes,
                                     std::vector<uint8_t>* out) {
  if (!ctx_) return {SnapshotStatus::Invalid, "the sandbox is broken or disposed", {}};
  const BaselineGlobals& baseline = baselineGlobals(options_);
  if (!clampStack()) return {SnapshotStatus::StackExhausted, stackRefusal(), {}};
  if (intrinsics_.baselineGlobalAtoms.empty()) intrinsics_.holdBaselineGlobals(ctx_, baseline.utf8);
  WireLimits limits = limits_;
  limits.maxBytes = maxBytes;
  WireWriter w;
  SnapshotResult r = writeSnapshotBody(ctx_, intrinsics_, limits, baseline.names, exclude, w);
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
  clock_.resetExecution();
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
