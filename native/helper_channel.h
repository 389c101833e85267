// The addon's end of the channel to one helper process (native/helper/): spawning it with an empty
// environment on a socketpair, whole frames written by the main thread, and a reader thread that
// hands what the helper sends to the main thread: a direct frame (the answer to the request the
// main thread waits on in call()) to call(), any other to the JS callback given at construction,
// in arrival order. When the helper dies, closes the channel or sends a frame that does not parse,
// it is killed and reaped, and the callback learns how it ended. The helper is hostile: a frame's
// length is checked against the limit the parent set (setFrameLimit, at most QJSN_CHANNEL_SIZES'
// maxFrameBytes) before anything is allocated, its buffer grows only with the bytes that arrived,
// and every wait of the main thread has a deadline, after which the helper is killed.
#pragma once

#include <napi.h>

#include <memory>

namespace qjsn {

class HelperChannel : public Napi::ObjectWrap<HelperChannel> {
 public:
  // Undefined where helper processes cannot be spawned (Windows, for now).
  static Napi::Value Define(Napi::Env env);
  // new HelperChannel(path, args: string[], onEvents(frames: Buffer[], lost?: [signal, exitCode, overLimit]))
  explicit HelperChannel(const Napi::CallbackInfo& info);
  ~HelperChannel() override;

  struct Shared;

 private:
  // send(frame) -> true when written within the deadline (else the helper is killed)
  Napi::Value Send(const Napi::CallbackInfo& info);
  // call(frame, timeoutMs) -> the next direct frame, or undefined once the helper is lost
  Napi::Value Call(const Napi::CallbackInfo& info);
  // ref() / unref(): whether pending events keep the event loop alive
  Napi::Value Ref(const Napi::CallbackInfo& info);
  Napi::Value Unref(const Napi::CallbackInfo& info);
  // kill(): SIGKILL now (the reader reports it lost)
  Napi::Value Kill(const Napi::CallbackInfo& info);
  // setFrameLimit(bytes): the largest body the parent expects from now on; a frame over it kills the helper
  Napi::Value SetFrameLimit(const Napi::CallbackInfo& info);
  Napi::Value Pid(const Napi::CallbackInfo& info);
  // ended() -> [signal, exitCode, overLimit] once the helper is reaped (before the callback may have heard), else undefined
  Napi::Value Ended(const Napi::CallbackInfo& info);

  std::shared_ptr<Shared> shared_;
};

}  // namespace qjsn
