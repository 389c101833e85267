#include "process_facts.h"

#include "contract.h"
#include "engine.h"
#include "executor.h"
#include "reaper.h"

namespace qjsn {

namespace {

Napi::Array pair(Napi::Env env, double first, double second) {
  Napi::Array a = Napi::Array::New(env, 2);
  a.Set(0u, Napi::Number::New(env, first));
  a.Set(1u, Napi::Number::New(env, second));
  return a;
}

}  // namespace

void exportProcessFacts(Napi::Env env, Napi::Object exports) {
  exports.Set("threadStackBytes", Napi::Number::New(env, static_cast<double>(Executor::kThreadStackBytes)));
  exports.Set("executorThreads", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                Executor::Counts c = Executor::instance().counts();
                return pair(info.Env(), c.threads, c.maxThreads);
              }));
  exports.Set("reaperBytes", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                ReaperBytes bytes = reaperBytes();
                return pair(info.Env(), static_cast<double>(bytes.pending), bytes.freed);
              }));
  exports.Set("heapTrims", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                return Napi::Number::New(info.Env(), heapTrims());
              }));
  exports.Set("engineVersion", Napi::String::New(env, JS_GetVersion()));
  exports.Set("contract", contractObject(env));
}

}  // namespace qjsn
