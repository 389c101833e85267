// What the snapshot writer (snapshot_writer.cc) and reader (snapshot_reader.cc) share besides
// the value walk (value_walk.h): the placeholder getter class and small descriptor helpers.
#pragma once

#include <string>

#include "snapshot.h"
#include "value_walk.h"

namespace qjsn {

struct PlaceholderInfo {
  std::string name, type;
};

// What a placeholder getter stands for; null for any other value.
const PlaceholderInfo* placeholderInfoOf(JSValueConst getter);
// A new placeholder getter: reading the property it guards throws notRestoredMessage(name, type).
// JS_EXCEPTION when the engine raised.
JSValue newPlaceholderGetter(JSContext* ctx, const std::string& name, const std::string& type);

// The own data property `name` of `obj`, or undefined (getters are never run).
OwnedValue ownData(JSContext* ctx, JSValueConst obj, JSAtom name);

// Takes the pending exception after the engine raised: a stack overflow (deep nesting) is a
// size problem, anything else is out of memory.
void takeEngineFailure(JSContext* ctx, SnapshotResult* result);

}  // namespace qjsn
