// Guest calls to host functions: synchronous ones (through the codec, or the primitive fast path
// of inline evals) and async ones (a promise settled by a later slice), under the copy budget.
#include <cmath>
#include <optional>

#include "engine.h"

namespace qjsn {

using Phase = EvalLifecycle::Phase;
using Event = EvalLifecycle::Event;

JSValue Engine::hostTrampoline(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int magic, JSValueConst* data) {
  Engine* e = of(ctx);
  bool async = JS_VALUE_GET_BOOL(data[0]);
  // Inline evals run on the main thread: primitives can go straight to the host function. Tested
  // here, before callHost's frame (a codec's worth of locals) is set up.
  JSValue fast;
  if (!async && argc <= kMaxPrimitiveArgs && e->options_.primitiveHostCalls && e->lifecycle_.syncRunning() &&
      e->stop_.load(std::memory_order_relaxed) == 0 &&
      e->callHostPrimitive(static_cast<uint32_t>(magic), argc, argv, &fast))
    return fast;
  return e->callHost(magic, async, argc, argv);
}

JSValue Engine::callHost(int fnId, bool async, int argc, JSValueConst* argv) {
  if (stop_.load() != 0) return JS_ThrowInternalError(ctx_, "the eval has ended");
  WireWriter w;
  WireLimits limits = copyLimits();
  GuestEncoder enc(ctx_, intrinsics_, w, limits, false);
  if (!enc.encodeArguments(argc, argv)) {
    const CodecError& e = enc.error();
    if (e.status == CodecStatus::GuestException) return JS_EXCEPTION;
    if (overCopyBudget(e)) return stopGuest(StopReason::CopyLimit);
    std::string msg = "argument" + (e.path.empty() ? std::string() : " " + e.path) + ": " + e.message;
    return JS_ThrowTypeError(ctx_, "%s", msg.c_str());
  }
  chargeCopy(w.size());
  hostCalls_.count();
  if (async) {
    if (lifecycle_.syncRunning()) {
      return JS_ThrowTypeError(ctx_, "async host functions need eval(); evalSync cannot wait for them");
    }
    StopReason refused = hostCalls_.admit(copiedBytes_, options_.copyLimitBytes);
    if (refused != StopReason::None) return stopGuest(refused);
    JSValue funcs[2];
    JSValue promise = JS_NewPromiseCapability(ctx_, funcs);
    if (JS_IsException(promise)) return promise;
    uint32_t callId = hostCalls_.add(OwnedValue(ctx_, funcs[0]), OwnedValue(ctx_, funcs[1]));
    bridge_->postAsyncCall(id_, evalId_, callId, static_cast<uint32_t>(fnId), std::move(w.bytes()));
    return promise;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lifecycle_.apply(Event::HostCallStarted)) return JS_ThrowInternalError(ctx_, "the eval has ended");
  }
  clock_.pause();
  HostResult r = bridge_->callSync(id_, static_cast<uint32_t>(fnId), std::move(w.bytes()));
  clock_.resume();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lifecycle_.apply(Event::HostCallEnded)) return JS_ThrowInternalError(ctx_, "the eval has ended");
  }
  if (stop_.load() != 0) return JS_ThrowInternalError(ctx_, "the eval has ended");
  return syncResultToGuest(r);
}

namespace {

// Borrows the characters of the guest strings of one call for the primitive fast path, without a
// copy when they are ASCII (QuickJS hands out its own bytes then). Most calls pass no string: then
// constructing and destroying this is one store and one test.
class BorrowedStrings {
 public:
  explicit BorrowedStrings(JSContext* ctx) : ctx_(ctx) {}
  BorrowedStrings(const BorrowedStrings&) = delete;
  BorrowedStrings& operator=(const BorrowedStrings&) = delete;
  ~BorrowedStrings() {
    for (int i = 0; i < count_; i++) {
      if (held_[i].utf8) JS_FreeCString(ctx_, held_[i].utf8);
      if (held_[i].utf16) JS_FreeCStringUTF16(ctx_, held_[i].utf16);
    }
  }
  // -1: out of memory (thrown); 0: too long; 1: `*p` describes it. At most kMaxPrimitiveArgs calls.
  int borrow(JSValueConst str, Primitive* p) {
    int64_t units = 0;
    if (JS_GetLength(ctx_, str, &units) < 0) return -1;  // a string's own length: runs no guest code
    if (units > static_cast<int64_t>(kMaxPrimitiveChars)) return 0;
    Held& h = held_[count_++];
    h = Held{nullptr, nullptr};
    size_t bytes = 0;
    h.utf8 = JS_ToCStringLen(ctx_, &bytes, str);
    if (!h.utf8) return -1;
    if (!encodesLoneSurrogate(h.utf8, bytes)) {
      p->kind = Primitive::Kind::Utf8;
      p->chars = h.utf8;
      p->length = bytes;
      return 1;
    }
    // Node would replace those bytes: take the UTF-16 units, which keep the surrogate.
    h.utf16 = JS_ToCStringLenUTF16(ctx_, &p->length, str);
    if (!h.utf16) return -1;
    p->kind = Primitive::Kind::Utf16;
    p->chars = h.utf16;
    return 1;
  }

 private:
  // QuickJS writes a lone surrogate U+D800..U+DFFF as ED A0..BF xx; a pair becomes 4 bytes.
  static bool encodesLoneSurrogate(const char* s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
      if (static_cast<uint8_t>(s[i]) == 0xED && static_cast<uint8_t>(s[i + 1]) >= 0xA0) return true;
    return false;
  }
  struct Held {  // trivial, so that held_ is not zeroed for calls that pass no string
    const char* utf8;
    const uint16_t* utf16;
  };
  JSContext* ctx_;
  int count_ = 0;
  Held held_[kMaxPrimitiveArgs];
};

}  // namespace

// False, having done nothing, when an argument is not a primitive this path carries.
bool Engine::callHostPrimitive(uint32_t fnId, int argc, JSValueConst* argv, JSValue* out) {
  PrimitiveCall call;
  call.fnId = fnId;
  call.argc = argc;
  BorrowedStrings texts(ctx_);
  for (int i = 0; i < argc; i++) {
    JSValueConst v = argv[i];
    Primitive& a = call.args[i];
    switch (JS_VALUE_GET_NORM_TAG(v)) {
      case JS_TAG_UNDEFINED: a.kind = Primitive::Kind::Undefined; break;
      case JS_TAG_NULL: a.kind = Primitive::Kind::Null; break;
      case JS_TAG_BOOL:
        a.kind = Primitive::Kind::Boolean;
        a.number = JS_VALUE_GET_BOOL(v);
        break;
      case JS_TAG_INT:
        a.kind = Primitive::Kind::Number;
        a.number = JS_VALUE_GET_INT(v);
        break;
      case JS_TAG_FLOAT64:
        a.kind = Primitive::Kind::Number;
        a.number = JS_VALUE_GET_FLOAT64(v);
        break;
      case JS_TAG_STRING: {
        int borrowed = texts.borrow(v, &a);
        if (borrowed < 0) {
          *out = JS_EXCEPTION;  // out of memory, already thrown
          return true;
        }
        if (borrowed == 0) return false;
        break;
      }
      default: return false;
    }
  }
  hostCalls_.count();
  // An inline eval holds the engine Running on this thread, so nothing else can enter it while the
  // host function runs: only its time is kept out of the budget. These calls are many and short,
  // so that time is read from the coarse clock (unbiased over many calls, nearly free) rather
  // than by pausing and resuming the execution clock (two precise clock reads a call).
  int64_t hostStartNs = coarseMonotonicNs();
  bool primitive = bridge_->callSyncPrimitive(id_, &call);
  int64_t hostNs = coarseMonotonicNs() - hostStartNs;
  if (hostNs != 0) clock_.excludeHostTime(hostNs);  // most calls see no tick of the coarse clock
  if (stop_.load(std::memory_order_relaxed) != 0) {
    *out = JS_ThrowInternalError(ctx_, "the eval has ended");
    return true;
  }
  if (!primitive) {
    *out = syncResultToGuest(*call.fallback);
    return true;
  }
  const Primitive& result = call.result;
  switch (result.kind) {
    case Primitive::Kind::Undefined: *out = JS_UNDEFINED; break;
    case Primitive::Kind::Null: *out = JS_NULL; break;
    case Primitive::Kind::Boolean: *out = JS_NewBool(ctx_, result.number != 0); break;
    case Primitive::Kind::Number: {
      // The codec's rule: an integer in int32 range (not -0) is an int, anything else a float.
      double d = result.number;
      bool isInt = d >= -2147483648.0 && d <= 2147483647.0 && d == static_cast<double>(static_cast<int32_t>(d)) &&
                   !(d == 0 && std::signbit(d));
      *out = isInt ? JS_NewInt32(ctx_, static_cast<int32_t>(d)) : JS_NewFloat64(ctx_, d);
      break;
    }
    case Primitive::Kind::Utf8:
      *out = JS_NewStringLen(ctx_, static_cast<const char*>(result.chars), result.length);
      break;
    case Primitive::Kind::Utf16:
      *out = JS_NewStringUTF16(ctx_, static_cast<const uint16_t*>(result.chars), result.length);
      break;
  }
  return true;
}

JSValue Engine::syncResultToGuest(const HostResult& r) {
  if (!r.ok) {
    JSValue err = newHostError(r);
    return JS_IsException(err) ? err : JS_Throw(ctx_, err);
  }
  WireReader reader(r.value.data(), r.value.size());
  GuestDecoder dec(ctx_, intrinsics_, limits_);
  JSValue v = dec.decode(reader);
  if (JS_IsException(v) && dec.error().status != CodecStatus::GuestException)
    return JS_ThrowTypeError(ctx_, "the host result could not be copied into the sandbox: %s", dec.error().message.c_str());
  return v;
}

// Ends the eval: its host calls would take the host past the eval's copy budget, or past its cap
// on calls in flight. The error is uncatchable, like an interrupt, so the guest cannot retry
// smaller pieces forever.
JSValue Engine::stopGuest(StopReason reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int expected = 0;
    if (stop_.compare_exchange_strong(expected, static_cast<int>(reason))) stopRequestedNs_ = monotonicNs();
  }
  JSValue err = JS_NewError(ctx_);
  if (JS_IsException(err)) return err;
  const char* message = reason == StopReason::CopyLimit ? "the eval's copy limit ran out" : "too many host calls in flight";
  JS_DefinePropertyValueStr(ctx_, err, "message", JS_NewString(ctx_, message), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  JS_SetUncatchableError(ctx_, err);
  return JS_Throw(ctx_, err);
}

// The guest's Error for a host function's failure: its message, and its name unless plain "Error".
JSValue Engine::newHostError(const HostResult& r) {
  JSValue err = JS_NewError(ctx_);
  if (JS_IsException(err)) return err;
  JS_DefinePropertyValueStr(ctx_, err, "message", JS_NewStringLen(ctx_, r.errorMessage.data(), r.errorMessage.size()),
                            JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  if (!r.errorName.empty() && r.errorName != "Error")
    JS_DefinePropertyValueStr(ctx_, err, "name", JS_NewStringLen(ctx_, r.errorName.data(), r.errorName.size()),
                              JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  return err;
}

// Resolves or rejects the promises of the async host calls these results answer; results for
// calls the eval no longer waits for are dropped.
void Engine::settleHostCalls(std::vector<HostResult>* results) {
  for (HostResult& r : *results) {
    HostCallTable::PendingCall call;
    if (!hostCalls_.take(r.callId, &call)) continue;
    OwnedValue arg;
    bool ok = r.ok;
    if (ok) {
      WireReader reader(r.value.data(), r.value.size());
      GuestDecoder dec(ctx_, intrinsics_, limits_);
      arg = OwnedValue(ctx_, dec.decode(reader));
      if (arg.isException()) {
        JS_FreeValue(ctx_, JS_GetException(ctx_));
        ok = false;
        r.errorName = "TypeError";
        r.errorMessage = "the host result could not be copied into the sandbox: " + dec.error().message;
      }
    }
    if (!ok) arg = OwnedValue(ctx_, newHostError(r));
    JSValueConst args[1] = {arg.get()};
    OwnedValue ignored(ctx_, JS_Call(ctx_, (ok ? call.resolve : call.reject).get(), JS_UNDEFINED, 1, args));
    if (ignored.isException()) JS_FreeValue(ctx_, JS_GetException(ctx_));
  }
}

}  // namespace qjsn
