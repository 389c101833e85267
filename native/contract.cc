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

// [text, ...], frozen.
template <size_t N>
Napi::Array frozenTexts(Napi::Env env, const char* const (&texts)[N]) {
  Napi::Array array = Napi::Array::New(env, N);
  for (uint32_t i = 0; i < N; i++) array.Set(i, Napi::String::New(env, texts[i]));
  array.Freeze();
  return array;
}

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
  QJSN_NUMBERED("snapshotResultSlot", QJSN_SNAPSHOT_RESULT_SLOTS)
  QJSN_NUMBERED("statsSlot", QJSN_STATS_SLOTS)
  QJSN_NUMBERED("answeredSlot", QJSN_ANSWERED_SLOTS)
  QJSN_NUMBERED("jobKind", QJSN_JOB_KINDS)
  QJSN_NUMBERED("requestSlot", QJSN_REQUEST_SLOTS)
  QJSN_NUMBERED("createSlot", QJSN_CREATE_SLOTS)
  QJSN_NUMBERED("callSlot", QJSN_CALL_SLOTS)
  QJSN_NUMBERED("primitiveSlot", QJSN_PRIMITIVE_SLOTS)
  QJSN_NUMBERED("dispatchKind", QJSN_DISPATCH_KINDS)
  QJSN_NUMBERED("channelFrame", QJSN_CHANNEL_FRAMES)
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

  Numbered channelSizes(env);
#define QJSN_ADD_CHANNEL_SIZE(name, value) channelSizes.set(#name, value);
  QJSN_CHANNEL_SIZES(QJSN_ADD_CHANNEL_SIZE)
#undef QJSN_ADD_CHANNEL_SIZE
  contract.Set("channelSizes", channelSizes.done());

  contract.Set("errorCodes", frozenTexts(env, kErrorCodeNames));
  contract.Set("opaqueKinds", frozenTexts(env, kOpaqueKindNames));
  contract.Set("consoleLevels", frozenTexts(env, kConsoleLevels));

  contract.Freeze();
  return contract;
}

}  // namespace qjsn
