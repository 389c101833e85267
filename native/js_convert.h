// Native results as the JavaScript values src/native.ts types, and JavaScript bytes as native
// ones. Positions and codes come from the boundary table (native/boundary.h).
#pragma once

#include <napi.h>

#include <cstdint>
#include <vector>

#include "engine.h"

namespace qjsn {

// The bytes of a Buffer or Uint8Array (a copy); empty for anything else.
std::vector<uint8_t> bytesOf(const Napi::Value& v);

// [status, body | message, [name, type, ...]] of a snapshot read or write.
Napi::Value snapshotResultToJs(Napi::Env env, const SnapshotResult& r, Napi::Value payload);

// The array an async eval resolves with, by OutcomeSlot.
Napi::Value outcomeToJs(Napi::Env env, EvalOutcome& o);

// { code, message } of a direct call's failure; undefined when there is none.
Napi::Value errorToJs(Napi::Env env, const std::optional<NativeError>& error);

// Throws `error` as an Error whose `code` and `message` are the NativeError's: the shape of a
// failure a call cannot return (the constructor's, a disposed handle's).
void throwNativeError(Napi::Env env, const NativeError& error);

}  // namespace qjsn
