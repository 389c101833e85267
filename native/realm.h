// The trimmed realm: what a fresh sandbox context must not offer guest code. Applied once,
// after the intrinsics are captured and before any guest code runs. See SECURITY.md.
#pragma once

#include "qjs_raii.h"

namespace qjsn {

// Removes the globals and hooks listed in realm.cc. False when one cannot be removed (out of
// memory at creation): the context must not be used then.
bool trimRealm(JSContext* ctx);

}  // namespace qjsn
