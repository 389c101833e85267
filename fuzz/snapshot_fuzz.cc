// libFuzzer target: the snapshot body reader (native/snapshot_reader.cc and the value builder it
// shares with the boundary codec, native/value_walk.cc) on arbitrary bytes, through the same Engine
// entry point a restore uses, then writing the restored globals back out and reading that snapshot
// into a second engine.
//
// The envelope's digest or HMAC is checked before a body is parsed, but a signing key can leak
// and a body can be corrupted before it is signed: the reader trusts nothing. Bodies carry
// function source text that the reader evaluates, so each engine runs under a small execution
// budget. Each input gets fresh engines; the debug build's JS_FreeRuntime (with
// JS_ABORT_ON_LEAKS, set below through patch 0031's QJSN_DUMP_FLAGS) aborts on any leaked
// object, string or atom.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine.h"
#include "snapshot.h"

namespace {

using namespace qjsn;

constexpr double kBudgetMs = 50;

EngineOptions options() {
  EngineOptions o;
  o.memoryLimitBytes = 32u << 20;
  o.maxStackSizeBytes = 256 * 1024;
  o.captureConsole = false;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("QJSN_DUMP_FLAGS", "0x10C000", 0);  // JS_ABORT_ON_LEAKS
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> written;
  {
    Engine first(1, options(), nullptr);
    if (!first.valid()) abort();
    SnapshotResult read = first.readSnapshot(data, size, kBudgetMs);
    (void)read;  // any status is fine; only a crash, a leak or a hang is a bug
    SnapshotResult write = first.writeSnapshot({}, 16u << 20, &written);
    if (write.status != SnapshotStatus::Ok) written.clear();
  }
  if (!written.empty()) {
    Engine second(2, options(), nullptr);
    if (!second.valid()) abort();
    int64_t started = monotonicNs();
    SnapshotResult again = second.readSnapshot(written.data(), written.size(), kBudgetMs);
    bool hitBudget = monotonicNs() - started >= static_cast<int64_t>(kBudgetMs * 1e6);
    // What the writer produced, its own reader must accept. A read that ran out of time is left
    // out: readSnapshotBody reports a read interrupted while re-creating a function as a
    // malformed value (a RegExp or BigInt the interrupt stops reads as "bad RegExp" or "bad
    // BigInt"; found by this target), so the check would depend on load.
    if (again.status == SnapshotStatus::Invalid && !hitBudget) {
      fprintf(stderr, "snapshot_fuzz: a written snapshot was refused as invalid: %s\n", again.message.c_str());
      abort();
    }
  }
  return 0;
}
