// Module init: one EnvBridge per Node environment (native/env_bridge.h), the SandboxHandle class
// (native/sandbox_handle.h), the module's evalSync, the buffers shared with src/, the process-wide
// facts, and the cleanup hook that frees every live runtime when the environment goes away.
#include <napi.h>

#include <memory>

#include "env_bridge.h"
#include "process_facts.h"
#include "helper_channel.h"
#include "sandbox_handle.h"

namespace qjsn {

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto bridge = std::make_shared<EnvBridge>(env);
  bridge->start();
  env.SetInstanceData(new std::shared_ptr<EnvBridge>(bridge));
  env.AddCleanupHook([bridge]() { bridge->closeAll(); });
  exports.Set("SandboxHandle", SandboxHandle::Define(env));
  exports.Set("evalSync", SandboxHandle::DefineEvalSync(env, bridge.get()));
  exports.Set("HelperChannel", HelperChannel::Define(env));
  exports.Set("exchange", bridge->exchange());
  exports.Set("syncStats", bridge->statsArray());
  exports.Set("primitiveSlots", bridge->primitiveSlotsArray());
  exports.Set("request", bridge->requestArray());
  exports.Set("createSlots", bridge->createArray());
  exports.Set("callSlots", bridge->callArray());
  exportProcessFacts(env, exports);
  return exports;
}

}  // namespace

}  // namespace qjsn

static Napi::Object InitAddon(Napi::Env env, Napi::Object exports) { return qjsn::Init(env, exports); }

NODE_API_MODULE(quickjs_native, InitAddon)
