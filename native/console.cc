// The guest's console: log/info/warn/error/debug buffered for the outcome and, for async evals
// that ask, streamed to the host line by line, under the console and copy caps.
#include "engine.h"

namespace qjsn {

namespace {

JSValue consoleTrampoline(JSContext* ctx, JSValueConst, int argc, JSValueConst* argv, int level) {
  return Engine::of(ctx)->writeConsole(level, argc, argv);
}

}  // namespace

void Engine::installConsole() {
  OwnedValue global(ctx_, JS_GetGlobalObject(ctx_));
  OwnedValue console(ctx_, JS_NewObject(ctx_));
  for (int level = 0; level < 5; level++) {
    JSValue fn = JS_NewCFunctionMagic(ctx_, consoleTrampoline, kConsoleLevels[level], 0, JS_CFUNC_generic_magic, level);
    JS_DefinePropertyValueStr(ctx_, console.get(), kConsoleLevels[level], fn, JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
  }
  JS_DefinePropertyValueStr(ctx_, global.get(), "console", console.release(), JS_PROP_WRITABLE | JS_PROP_CONFIGURABLE);
}

JSValue Engine::writeConsole(int level, int argc, JSValueConst* argv) {
  if (!options_.captureConsole || consoleTruncated_ || stop_.load() != 0) return JS_UNDEFINED;
  WireWriter w;
  WireLimits consoleLimits = limits_;
  // A loose bound on the raw arguments (UTF-8 text is at most twice their size here); the exact
  // cap on formatted text is applied by src/sandbox.ts.
  size_t rawCap = options_.maxConsoleBytes * 2 + 64;
  consoleLimits.maxBytes = rawCap;
  uint64_t copyLeft = copyLimits().maxBytes;
  if (copyLeft < consoleLimits.maxBytes) consoleLimits.maxBytes = copyLeft;
  GuestEncoder enc(ctx_, intrinsics_, w, consoleLimits, true);
  bool ok = enc.encodeArguments(argc, argv);
  if (!ok && enc.error().status == CodecStatus::GuestException) return JS_EXCEPTION;
  if (!ok || console_.size() + w.size() + 5 > rawCap) {
    consoleTruncated_ = true;
    return JS_UNDEFINED;
  }
  console_.u8(static_cast<uint8_t>(level));
  console_.u32(static_cast<uint32_t>(w.size()));
  console_.raw(w.bytes().data(), w.size());
  chargeCopy(5 + w.size());
  if (request_.streamConsole && !lifecycle_.syncRunning()) {
    chargeCopy(w.size());  // a second copy goes to the host at once
    bridge_->postConsole(id_, evalId_, level, std::move(w.bytes()));
  }
  return JS_UNDEFINED;
}

}  // namespace qjsn
