// The fast path of a sync host call on the main thread: primitives in, a primitive out, no codec.
#pragma once

#include <node_api.h>

#include "env_bridge.h"

namespace qjsn {

// The dispatcher of src/host-calls.ts and `undefined`, both alive in the caller's handle scope.
struct PrimitiveDispatcher {
  napi_value dispatcher;
  napi_value undefined;
};

// Calls the dispatcher as dispatcher(a0, a1, a2) with the call and the number arguments in the
// primitive slots (QJSN_PRIMITIVE_SLOTS). It answers with a primitive (true: `call->result` holds
// it; a number comes back in the slots, a string's characters are written to `call->text`), [bytes]
// (the codec's answer) or [name, message] (false: `call->fallback` holds it). Raw Node-API calls
// that create no handle, scope or heap block beyond the arguments and the answer: this path is all
// overhead.
bool callPrimitiveDispatcher(napi_env env, PrimitiveDispatcher d, PrimitiveCall* call, EnvBridge& bridge);

}  // namespace qjsn
