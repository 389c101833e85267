// Native results as JavaScript values, and JavaScript bytes as native ones (see js_convert.h).
#include "js_convert.h"

#include <memory>

namespace qjsn {

namespace {

uint32_t at(OutcomeSlot slot) { return static_cast<uint32_t>(slot); }

// Past this size, bytes an executor thread wrote are handed over rather than copied on the main
// thread: a first-touch copy of an 11 MB snapshot body cost ~40 ms of page faults there.
constexpr size_t kHandOverBytes = 64 * 1024;

Napi::Value bufferOrUndefined(Napi::Env env, std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return env.Undefined();
  if (bytes.size() < kHandOverBytes) return Napi::Buffer<uint8_t>::Copy(env, bytes.data(), bytes.size());
  auto owned = std::make_unique<std::vector<uint8_t>>(std::move(bytes));
  auto buffer = Napi::Buffer<uint8_t>::NewOrCopy(
      env, owned->data(), owned->size(), [](Napi::Env, uint8_t*, std::vector<uint8_t>* done) { delete done; }, owned.get());
  if (buffer.IsEmpty()) return env.Undefined();
  owned.release();  // the buffer's finalizer frees it (at once when it had to copy)
  return buffer;
}

}  // namespace

std::vector<uint8_t> bytesOf(const Napi::Value& v) {
  if (v.IsBuffer()) {
    auto b = v.As<Napi::Buffer<uint8_t>>();
    return std::vector<uint8_t>(b.Data(), b.Data() + b.Length());
  }
  if (v.IsTypedArray()) {
    auto t = v.As<Napi::Uint8Array>();
    return std::vector<uint8_t>(t.Data(), t.Data() + t.ByteLength());
  }
  return {};
}

Napi::Value snapshotResultToJs(Napi::Env env, const SnapshotResult& r, Napi::Value payload) {
  Napi::Array notRestored = Napi::Array::New(env, r.notRestored.size() * 2);
  for (size_t i = 0; i < r.notRestored.size(); i++) {
    notRestored.Set(static_cast<uint32_t>(2 * i), Napi::String::New(env, r.notRestored[i].name));
    notRestored.Set(static_cast<uint32_t>(2 * i + 1), Napi::String::New(env, r.notRestored[i].type));
  }
  auto in = [](SnapshotResultSlot slot) { return static_cast<uint32_t>(slot); };
  Napi::Array a = Napi::Array::New(env, kSnapshotResultSlots);
  a.Set(in(SnapshotResultSlot::status), Napi::Number::New(env, static_cast<int>(r.status)));
  a.Set(in(SnapshotResultSlot::result),
        r.status == SnapshotStatus::Ok ? payload : Napi::String::New(env, r.message).As<Napi::Value>());
  a.Set(in(SnapshotResultSlot::notRestored), notRestored);
  return a;
}

Napi::Value outcomeToJs(Napi::Env env, EvalOutcome& o) {
  Napi::Array a = Napi::Array::New(env, kOutcomeSlots);
  a.Set(at(OutcomeSlot::status), Napi::Number::New(env, static_cast<int>(o.status)));
  a.Set(at(OutcomeSlot::value), bufferOrUndefined(env, o.value));
  a.Set(at(OutcomeSlot::message), Napi::String::New(env, o.message));
  a.Set(at(OutcomeSlot::stop), Napi::Number::New(env, static_cast<int>(o.stop)));
  a.Set(at(OutcomeSlot::console), bufferOrUndefined(env, o.console));
  a.Set(at(OutcomeSlot::consoleTruncated), Napi::Boolean::New(env, o.consoleTruncated));
  a.Set(at(OutcomeSlot::executionMs), Napi::Number::New(env, o.executionMs));
  a.Set(at(OutcomeSlot::hostCalls), Napi::Number::New(env, o.hostCalls));
  a.Set(at(OutcomeSlot::memoryUsedBytes), Napi::Number::New(env, static_cast<double>(o.memoryUsedBytes)));
  a.Set(at(OutcomeSlot::peakMemoryBytes), Napi::Number::New(env, static_cast<double>(o.peakMemoryBytes)));
  a.Set(at(OutcomeSlot::kind), Napi::Number::New(env, static_cast<int>(o.kind)));
  a.Set(at(OutcomeSlot::snapshot),
        o.snapshot ? snapshotResultToJs(env, *o.snapshot, bufferOrUndefined(env, o.snapshotBody)) : env.Undefined());
  return a;
}

Napi::Value errorToJs(Napi::Env env, const std::optional<NativeError>& error) {
  if (!error) return env.Undefined();
  Napi::Object o = Napi::Object::New(env);
  o.Set("code", Napi::String::New(env, errorCodeName(error->code)));
  o.Set("message", Napi::String::New(env, error->message));
  return o;
}

void throwNativeError(Napi::Env env, const NativeError& error) {
  Napi::Error e = Napi::Error::New(env, error.message);
  e.Set("code", Napi::String::New(env, errorCodeName(error.code)));
  e.ThrowAsJavaScriptException();
}

}  // namespace qjsn
