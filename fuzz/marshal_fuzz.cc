// libFuzzer target: the host -> guest marshaller reading arbitrary wire bytes, then the guest ->
// host marshaller copying the result back out.
//
// Wire bytes come from the host side (host function results, setGlobal) and, later, from stored
// snapshots: a malformed buffer must fail cleanly, never corrupt memory or leak a reference.
// After each input, a full GC must bring the runtime's live object, string and atom counts back
// to where they were: a reference the decoder or encoder forgot to free fails the run.
//
// Invariant checked beyond memory safety: encoding is a fixpoint after one round
// (encode(decode(encode(decode(x)))) == encode(decode(x))): the two directions agree on object
// numbering, back references, typed array views and collection contents.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "guest_codec.h"

namespace {

using namespace qjsn;

constexpr size_t kMemoryLimit = 32u << 20;

// Decodes `data` into `ctx` and encodes the result; returns false when either direction fails.
bool roundTrip(JSContext* ctx, const Intrinsics& in, const WireLimits& limits, const uint8_t* data, size_t size,
               std::vector<uint8_t>* out) {
  WireReader reader(data, size);
  GuestDecoder dec(ctx, in, limits);
  OwnedValue v(ctx, dec.decode(reader));
  if (v.isException()) {
    if (dec.error().status == CodecStatus::GuestException) JS_FreeValue(ctx, JS_GetException(ctx));
    return false;
  }
  WireWriter w;
  GuestEncoder enc(ctx, in, w, limits, false);  // decoded values hold nothing opaque
  if (!enc.encode(v.get())) {
    if (enc.error().status == CodecStatus::GuestException) JS_FreeValue(ctx, JS_GetException(ctx));
    return false;
  }
  *out = std::move(w.bytes());
  return true;
}

int interruptNever(JSRuntime*, void*) { return 0; }

struct Engine {
  JSRuntime* rt = nullptr;
  JSContext* ctx = nullptr;
  Intrinsics in;
  JSMemoryUsage baseline{};
};

// One runtime for the whole run: creating one per input costs most of the time under ASan.
// A leak shows as a live object, string or atom count above the baseline after a full GC.
Engine& engine() {
  static Engine* e = [] {
    auto* e = new Engine;
    e->rt = JS_NewRuntime();
    JS_SetMemoryLimit(e->rt, kMemoryLimit);
    JS_SetMaxStackSize(e->rt, 512 * 1024);
    JS_SetInterruptHandler(e->rt, interruptNever, nullptr);
    // Only the intrinsics the codec uses.
    e->ctx = JS_NewContextRaw(e->rt);
    if (!e->ctx || JS_AddIntrinsicBaseObjects(e->ctx) || JS_AddIntrinsicDate(e->ctx) || JS_AddIntrinsicRegExp(e->ctx) ||
        JS_AddIntrinsicMapSet(e->ctx) || JS_AddIntrinsicTypedArrays(e->ctx) || JS_AddIntrinsicBigInt(e->ctx) ||
        !e->in.load(e->ctx))
      abort();
    JS_RunGC(e->rt);
    JS_ComputeMemoryUsage(e->rt, &e->baseline);
    return e;
  }();
  return *e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Engine& e = engine();
  WireLimits limits;
  limits.maxNodes = 100000;
  limits.maxBytes = 16u << 20;
  std::vector<uint8_t> first, second;
  if (roundTrip(e.ctx, e.in, limits, data, size, &first)) {
    if (!roundTrip(e.ctx, e.in, limits, first.data(), first.size(), &second)) {
      fprintf(stderr, "marshal_fuzz: the encoder wrote bytes its own decoder rejects\n");
      abort();
    }
    if (first != second) {
      fprintf(stderr, "marshal_fuzz: encoding is not stable after one round trip (%zu vs %zu bytes)\n", first.size(),
              second.size());
      abort();
    }
  }
  JS_RunGC(e.rt);
  JSMemoryUsage now;
  JS_ComputeMemoryUsage(e.rt, &now);
  if (now.obj_count > e.baseline.obj_count || now.str_count > e.baseline.str_count ||
      now.atom_count > e.baseline.atom_count) {
    fprintf(stderr, "marshal_fuzz: leak: objects %lld -> %lld, strings %lld -> %lld, atoms %lld -> %lld\n",
            (long long)e.baseline.obj_count, (long long)now.obj_count, (long long)e.baseline.str_count,
            (long long)now.str_count, (long long)e.baseline.atom_count, (long long)now.atom_count);
    abort();
  }
  return 0;
}
