// The boundary table, as JavaScript sees it (native/contract.cc).
#pragma once

#include <napi.h>

namespace qjsn {

// The frozen `contract` export: every list of native/boundary.h as numbers and strings.
Napi::Object contractObject(Napi::Env env);

}  // namespace qjsn
