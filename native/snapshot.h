// Snapshot bodies: every user-defined global of a context, written in the wire format as one
// graph (shared references and cycles kept across globals), and read back into a fresh context.
//
// A body is data plus source text, never engine bytecode. Functions, classes, getters and setters
// are stored as their source text and re-created by evaluating it in the new context; instances
// keep their class's prototype. What cannot be stored (a closure over a function's locals, a
// Proxy, a Promise, a symbol, an instance with private fields...) is stored as a named placeholder
// that throws when read. Not kept: symbol-keyed and non-enumerable properties, named properties
// of arrays, extra own properties of Errors, property attributes (frozen objects thaw), changes
// to built-ins and their prototypes, the `lastIndex` of regular expressions.
//
//   body    := u32 count, count * entry
//   entry   := u8 Binding, u8 property flags (JS_PROP_* of a global object property),
//              string name, value
//   value   := any wire value, plus Function / Prototype / Instance / Placeholder / Accessor
//              (wire.h); Placeholder and Accessor only where a property is defined
//
// The header, size caps and signatures are src/snapshot.ts's job; this layer trusts nothing and
// checks every length before reading it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "intrinsics.h"
#include "wire.h"

namespace qjsn {

// Where a global lives.
enum class Binding : uint8_t {
  GlobalProperty = 0,  // a property of the global object: var, function declarations, assignments
  Lexical = 1,         // a top-level let or class declaration
  LexicalConst = 2,    // a top-level const declaration
  Count
};

// A global (or a part of one, `name.path`) that was not stored or not re-created.
struct NotRestored {
  std::string name;
  std::string type;
};

// SnapshotStatus: native/boundary.h.

struct SnapshotResult {
  SnapshotStatus status = SnapshotStatus::Ok;
  std::string message;
  std::vector<NotRestored> notRestored;
};

// Writes a body. `exclude` holds global names the host owns (its functions), `baseline` the
// names every fresh context has; both are skipped.
SnapshotResult writeSnapshotBody(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits,
                                 const std::unordered_set<std::u16string>& baseline,
                                 const std::unordered_set<std::u16string>& exclude, WireWriter& out);

// Reads a body into `ctx`, defining each global as it is read. Source text is evaluated in the
// context, so the caller runs this under an execution deadline.
SnapshotResult readSnapshotBody(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits,
                                const uint8_t* data, size_t size);

// The text a placeholder throws, also used in restore reports.
std::string notRestoredMessage(const std::string& name, const std::string& type);

}  // namespace qjsn
