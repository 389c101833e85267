// The one walk over guest values that both codecs share: the boundary codec (guest_codec.cc) and
// the snapshot body writer and reader (snapshot_writer.cc, snapshot_reader.cc). Writing, it reads
// own property descriptors (never getters, never Proxy traps) and walks collections with the
// captured built-in forEach; what becomes of each element, property or entry (copied, described,
// stored as source, left as a placeholder) is the caller's callback. Reading, ValueBuilder builds
// every tag the two formats share and hands each child back to the reader that derives from it.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "intrinsics.h"
#include "wire.h"

namespace qjsn {

// UTF-8 text of a guest string; empty (the exception taken) when the engine raised.
std::string utf8Of(JSContext* ctx, JSValueConst v);
std::string utf8Of(JSContext* ctx, const std::u16string& s);
std::string atomText(JSContext* ctx, JSAtom atom);

// The wire kind of an engine typed array type; TypedKind::Count for any other number.
TypedKind typedKindOf(int qjsType);
// The engine type of a wire kind below TypedKind::DataView.
JSTypedArrayEnum qjsTypeOf(TypedKind kind);

// Writes `v` when it is undefined, null, a boolean or a number; false for any other value.
bool writeScalar(JSValueConst v, WireWriter& out);

enum class Put { Ok, Raised, OverCap };  // Raised: the engine raised, its exception is pending
// Writes a guest string (one byte per unit when they all fit) unless it would take the output
// past `maxBytes`.
Put writeString(JSContext* ctx, JSValueConst s, WireWriter& out, uint64_t maxBytes = UINT64_MAX);
// Writes a property name as a string: an integer atom as its decimal text.
Put writeAtomKey(JSContext* ctx, JSAtom atom, WireWriter& out, uint64_t maxBytes = UINT64_MAX);

// How a walk ended. Stopped: a callback returned false or Step::Stop (it recorded why); Raised:
// the engine raised and its exception is pending.
enum class Walk { Done, Stopped, Raised };

// What an entry callback asks for next. Propagate ends the walk with the engine's own pending
// exception (a stack overflow stays one) instead of the walk's stop signal. Cut (a copy for
// display that spent its budget) leaves this entry and every later one out: the walk ends as
// Done, an Object, Map or Set with a Tag::More entry saying how many entries it had in all (an
// Array's length says it already); a callback answers Cut before writing anything of the entry.
// A callback may also answer true (Continue) or false (Stop).
enum class Step { Continue, Stop, Propagate, Cut };
inline Step stepOf(bool ok) { return ok ? Step::Continue : Step::Stop; }
inline Step stepOf(Step step) { return step; }

// 1 when `atom` names an array index ("0".."4294967294"), setting `index`; 0 for any other name;
// -1 when the engine raised.
int arrayIndexOf(JSContext* ctx, JSAtom atom, uint32_t* index);

// Writes an Array: tag, length and count, then for each own index property in key order its
// index and whatever `element(index, descriptor)` writes (see Step). Named properties of arrays
// are not part of the format.
template <class Element>
Walk walkArray(JSContext* ctx, JSValueConst array, WireWriter& out, Element&& element) {
  int64_t length = 0;
  if (JS_GetLength(ctx, array, &length) < 0) return Walk::Raised;
  OwnedPropertyEnum keys(ctx);
  if (!keys.load(array, JS_GPN_STRING_MASK)) return Walk::Raised;
  out.tag(Tag::Array);
  out.u32(static_cast<uint32_t>(length));
  size_t countAt = out.size();
  out.u32(0);
  uint32_t count = 0;
  for (uint32_t i = 0; i < keys.size(); i++) {
    uint32_t index;
    int isIndex = arrayIndexOf(ctx, keys.atom(i), &index);
    if (isIndex < 0) return Walk::Raised;
    if (isIndex == 0) continue;
    OwnedDescriptor d(ctx);
    int r = d.load(array, keys.atom(i));
    if (r < 0) return Walk::Raised;
    if (r == 0) continue;
    size_t entryAt = out.size();
    out.u32(index);
    Step step = stepOf(element(index, d));
    if (step == Step::Cut) {
      out.truncate(entryAt);
      break;
    }
    if (step != Step::Continue) return Walk::Stopped;
    count++;
  }
  out.patchU32(countAt, count);
  return Walk::Done;
}

// Writes a u32 count, then for each enumerable own string-keyed property of `obj` whatever
// `property(atom, descriptor)` writes (its key and value; see Step).
template <class Property>
Walk walkProperties(JSContext* ctx, JSValueConst obj, WireWriter& out, Property&& property) {
  OwnedPropertyEnum keys(ctx);
  if (!keys.load(obj, JS_GPN_STRING_MASK | JS_GPN_ENUM_ONLY)) return Walk::Raised;
  size_t countAt = out.size();
  out.u32(0);
  uint32_t count = 0;
  for (uint32_t i = 0; i < keys.size(); i++) {
    OwnedDescriptor d(ctx);
    int r = d.load(obj, keys.atom(i));
    if (r < 0) return Walk::Raised;
    if (r == 0 || !(d.desc.flags & JS_PROP_ENUMERABLE)) continue;
    Step step = stepOf(property(keys.atom(i), d));
    if (step == Step::Cut) {
      // The keys were listed enumerable only, and no guest code ran since: the rest all count.
      out.tag(Tag::More);
      out.u32(count + (keys.size() - i));
      count++;
      break;
    }
    if (step != Step::Continue) return Walk::Stopped;
    count++;
  }
  out.patchU32(countAt, count);
  return Walk::Done;
}

using EntryFn = Step (*)(void* data, JSValueConst value, JSValueConst key);
Walk walkCollectionWith(JSContext* ctx, const Intrinsics& in, JSValueConst coll, bool isMap, WireWriter& out,
                        EntryFn entry, void* data);

// Writes a Map or Set: tag and count, then whatever `entry(value, key)` writes for each entry (a
// Set passes each value as its own key), walked with the captured built-in forEach (see Step).
template <class Entry>
Walk walkCollection(JSContext* ctx, const Intrinsics& in, JSValueConst coll, bool isMap, WireWriter& out, Entry&& entry) {
  using E = std::remove_reference_t<Entry>;
  EntryFn call = [](void* data, JSValueConst value, JSValueConst key) { return (*static_cast<E*>(data))(value, key); };
  return walkCollectionWith(ctx, in, coll, isMap, out, call, &entry);
}

// Builds guest values from the tags both formats share: scalars, strings, BigInt, Array, Date,
// RegExp, Map, Set, ArrayBuffer, typed arrays and DataView, Error and BackRef. A reader derives
// from it, reads the tags of its own first and hands the rest to readShared; every child is read
// back through the reader's readChild, so nested values get its own tags too.
class ValueBuilder {
 public:
  ValueBuilder(const ValueBuilder&) = delete;
  ValueBuilder& operator=(const ValueBuilder&) = delete;

 protected:
  ValueBuilder(JSContext* ctx, const Intrinsics& intrinsics, const WireLimits& limits)
      : ctx_(ctx), in_(intrinsics), limits_(limits) {}
  virtual ~ValueBuilder();

  // The value of `tag` (already read); JS_EXCEPTION after invalid() or guestFailed().
  JSValue readShared(WireReader& in, Tag tag, uint32_t depth);
  // A string value (either form, tag included).
  JSValue readStringValue(WireReader& in);

  virtual JSValue readChild(WireReader& in, uint32_t depth) = 0;
  // Reads an array element's value and defines it at `index`.
  virtual bool readElement(WireReader& in, JSValueConst array, uint32_t index, uint32_t depth);
  // What a BackRef to an object that could not be re-created reads as (the slot holds JS_NULL).
  virtual JSValue lostObject() { return invalid("reference to an unknown object"); }
  virtual JSValue invalid(const char* what) = 0;
  virtual JSValue guestFailed() = 0;

  // Numbers `v` for BackRefs (a counted reference kept until the builder goes away).
  JSValue remember(JSValue v);

  JSContext* ctx_;
  const Intrinsics& in_;
  const WireLimits& limits_;
  // One reference to each numbered object, for BACKREFs. Owned, not borrowed: malformed data can
  // drop an object from the value being built (a duplicate key or index, an Error stack that is
  // not a string) and still refer to it later.
  std::vector<JSValue> objects_;

 private:
  JSValue readBigInt(WireReader& in, bool hex);
  JSValue readArray(WireReader& in, uint32_t depth);
  JSValue readCollection(WireReader& in, bool isMap, uint32_t depth);
  JSValue readView(WireReader& in, uint32_t depth);
  JSValue readError(WireReader& in, uint32_t depth);
};

}  // namespace qjsn
