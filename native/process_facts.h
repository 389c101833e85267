// What the addon exports about the process rather than one sandbox: the boundary table, the
// engine's version, the executor's threads and the reaper's bytes.
#pragma once

#include <napi.h>

namespace qjsn {

void exportProcessFacts(Napi::Env env, Napi::Object exports);

}  // namespace qjsn
