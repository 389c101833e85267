// The boundary table of native/boundary.h as a frozen plain object of numbers and strings,
// exported at load as `contract`: src/native.ts derives every TypeScript constant of the boundary
// from it, so the two sides cannot drift apart.
#include "contract.h"

#include "boundary.h"

namespace qjsn {

namespace {

// { name: position } of a list whose entries are numbered in order.
class Numbered {
 public:
  explicit Numbered(Napi::Env env) : env_(env), object_(Napi::Object::New(env)) {}
  void add(const char* name) { set(name, next_++); }
  void set(const char* name, double value) { object_.Set(name, Napi::Number::New(env_, value)); }
  Napi::Object done() {
    object_.Freeze();
    return object_;
  }

 private:
  Napi::Env env_;
  Napi::Object object_;
  uint32_t next_ = 0;
};

// [text, ...] by position.
class Texts {
 public:
  explicit Texts(Napi::Env env) : env_(env), array_(Napi::Array::New(env)) {}
  void add(const char* text) { array_.Set(array_.Length(), Napi::String::New(env_, text)); }
  Napi::Array done() {
    array_.Freeze();
    return array_;
  }

 private:
  Napi::Env env_;
  Napi::Array array_;
};

}  // namespace

Napi::Object contractObject(Napi::Env env) {
  Napi::Object contract = Napi::Object::New(env);
#define QJSN_ADD_NAME(name, ...) list.add(#name);
#define QJSN_NUMBERED(key, LIST)    \
  {                                 \
    Numbered list(env);             \
    LIST(QJSN_ADD_NAME)             \
    contract.Set(key, list.done()); \
  }
  QJSN_NUMBERED("evalStatus", QJSN_EVAL_STATUSES)
  QJSN_NUMBERED("stopReason", QJSN_STOP_REASONS)
  QJSN_NUMBERED("snapshotStatus", QJSN_SNAPSHOT_STATUSES)
  QJSN_NUMBERED("typedKind", QJSN_TYPED_KINDS)
  QJSN_NUMBERED("outcomeSlot", QJSN_OUTCOME_SLOTS)
  QJSN_NUMBERED("statsSlot", QJSN_STATS_SLOTS)
  QJSN_NUMBERED("dispatchKind", QJSN_DISPATCH_KINDS)
#undef QJSN_NUMBERED
#undef QJSN_ADD_NAME

  Numbered tags(env);
#define QJSN_ADD_TAG(name, byte) tags.set(#name, byte);
  QJSN_WIRE_TAGS(QJSN_ADD_TAG)
#undef QJSN_ADD_TAG
  contract.Set("wireTag", tags.done());

  Numbered limits(env);
#define QJSN_ADD_LIMIT(name, type, value) limits.set(#name, static_cast<double>(type{value}));
  QJSN_COPY_LIMITS(QJSN_ADD_LIMIT)
#undef QJSN_ADD_LIMIT
  contract.Set("copyLimits", limits.done());

  Numbered sizes(env);
#define QJSN_ADD_SIZE(name, value) sizes.set(#name, value);
  QJSN_BOUNDARY_SIZES(QJSN_ADD_SIZE)
#undef QJSN_ADD_SIZE
  contract.Set("sizes", sizes.done());

  Texts codes(env), opaque(env), levels(env);
#define QJSN_ADD_CODE(name, text) codes.add(text);
  QJSN_ERROR_CODES(QJSN_ADD_CODE)
#undef QJSN_ADD_CODE
#define QJSN_ADD_OPAQUE(name, text) opaque.add(text);
  QJSN_OPAQUE_KINDS(QJSN_ADD_OPAQUE)
#undef QJSN_ADD_OPAQUE
  for (const char* level : kConsoleLevels) levels.add(level);
  contract.Set("errorCodes", codes.done());
  contract.Set("opaqueKinds", opaque.done());
  contract.Set("consoleLevels", levels.done());

  contract.Freeze();
  return contract;
}

}  // namespace qjsn
