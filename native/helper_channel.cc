#include "helper_channel.h"

#if !defined(_WIN32)

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "boundary.h"
#include "js_convert.h"
#include "read_full.h"

namespace qjsn {

namespace {

constexpr int kWriteDeadlineMs = 30 * 1000;
// Bytes of frames read and not yet handed to the main thread: a helper that sends faster than the
// main thread takes (a flood of console frames) is killed rather than buffered without bound.
constexpr size_t kMaxQueuedBytes = 2 * static_cast<size_t>(channel::maxFrameBytes);
// A frame's body is read this much at a time, and its buffer grows only with what arrived: a
// helper that announces a large frame and stalls costs the parent what it sent, not what it announced.
constexpr size_t kReadChunkBytes = 64 * 1024;

// Appends `n` bytes read from `fd` to `frame`, growing it by at most a chunk per read.
bool readGrowing(int fd, std::vector<uint8_t>& frame, size_t n) {
  while (n > 0) {
    size_t at = frame.size();
    size_t want = n < kReadChunkBytes ? n : kReadChunkBytes;
    frame.resize(at + want);
    ssize_t got = ::read(fd, frame.data() + at, want);
    if (got < 0 && errno == EINTR) got = 0;
    else if (got <= 0) return false;
    frame.resize(at + static_cast<size_t>(got));
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

struct HelperChannel::Shared {
  int fd = -1;
  pid_t pid = -1;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<uint8_t>> direct;   // frames for call()
  std::vector<std::vector<uint8_t>> events;  // frames for the callback
  size_t eventBytes = 0;                     // their size in all
  bool eventsPosted = false;                 // a callback call is queued for `events`
  bool lost = false;
  bool lostReported = false;
  int termSignal = 0;
  int exitCode = -1;
  // The largest body the parent expects now (setFrameLimit), and whether a frame over it got the helper killed.
  std::atomic<uint32_t> frameLimit{channel::maxFrameBytes};
  bool overLimit = false;
  Napi::ThreadSafeFunction tsfn;
  bool tsfnClosed = false;     // under mu: the environment is being torn down and freed the function
  std::weak_ptr<Shared> self;  // a queued callback keeps the state alive, not the reader

  void killHelper() {
    if (pid > 0) ::kill(pid, SIGKILL);
  }

  // Writes a whole frame within the deadline; false (and the helper killed) otherwise.
  bool write(const uint8_t* p, size_t n) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWriteDeadlineMs);
    while (n > 0) {
      ssize_t put = ::send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (put > 0) {
        p += put;
        n -= static_cast<size_t>(put);
        continue;
      }
      if (put < 0 && errno == EINTR) continue;
      if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        pollfd pfd{fd, POLLOUT, 0};
        if (left.count() > 0 && ::poll(&pfd, 1, static_cast<int>(left.count())) >= 0) continue;
      }
      killHelper();
      return false;
    }
    return true;
  }

  // The reader thread: frames until the helper is gone, then its end.
  void readLoop() {
    while (true) {
      uint8_t header[channel::headerBytes];
      if (!readFull(fd, header, sizeof header)) break;
      uint32_t size = 0;
      std::memcpy(&size, header, 4);
      if (header[4] >= static_cast<uint8_t>(Frame::Count)) break;
      if (size > frameLimit.load()) {
        std::lock_guard<std::mutex> lock(mu);
        overLimit = true;
        break;
      }
      std::vector<uint8_t> frame(header, header + sizeof header);
      if (!readGrowing(fd, frame, size)) break;
      std::lock_guard<std::mutex> lock(mu);
      if (header[5] & channel::directFlag) {
        // A helper answers each direct request or host-call answer with one frame, taken before
        // the next is asked for: a second one waiting is a helper that does not follow the protocol.
        if (!direct.empty()) break;
        direct.push_back(std::move(frame));
        cv.notify_all();
      } else {
        eventBytes += frame.size();
        if (eventBytes > kMaxQueuedBytes) break;
        events.push_back(std::move(frame));
        post();
      }
    }
    killHelper();
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::lock_guard<std::mutex> lock(mu);
    lost = true;
    if (WIFSIGNALED(status)) termSignal = WTERMSIG(status);
    if (WIFEXITED(status)) exitCode = WEXITSTATUS(status);
    cv.notify_all();
    post();
    if (!tsfnClosed) tsfn.Release();
  }

  // Under mu: queues one callback call for what is in `events` (and the loss, once).
  void post() {
    if (eventsPosted || tsfnClosed) return;
    eventsPosted = true;
    std::shared_ptr<Shared> keep = self.lock();
    if (!keep) return;
    tsfn.NonBlockingCall([keep](Napi::Env env, Napi::Function callback) { keep->deliver(env, callback); });
  }

  // Main thread: hands the queued frames (and the loss, after them) to the callback.
  void deliver(Napi::Env env, Napi::Function callback) {
    std::vector<std::vector<uint8_t>> batch;
    bool reportLoss = false, over = false;
    int sig = 0, code = -1;
    {
      std::lock_guard<std::mutex> lock(mu);
      batch.swap(events);
      eventBytes = 0;
      eventsPosted = false;
      if (lost && !lostReported) {
        lostReported = reportLoss = true;
        sig = termSignal;
        code = exitCode;
        over = overLimit;
      }
    }
    if (env == nullptr || callback.IsEmpty()) return;
    // The plain C API, each failure ignored: while the environment is torn down (its handles are
    // closed, and this runs among them) no call into JavaScript succeeds, and node-addon-api
    // would turn the failure into a fatal error.
    napi_handle_scope scope;
    if (napi_open_handle_scope(env, &scope) != napi_ok) return;
    napi_value frames, loss, recv, triple[3];
    bool built = napi_create_array_with_length(env, batch.size(), &frames) == napi_ok &&
                 napi_get_undefined(env, &recv) == napi_ok && napi_get_undefined(env, &loss) == napi_ok;
    for (size_t i = 0; built && i < batch.size(); i++) {
      napi_value buffer;
      built = napi_create_buffer_copy(env, batch[i].size(), batch[i].data(), nullptr, &buffer) == napi_ok &&
              napi_set_element(env, frames, static_cast<uint32_t>(i), buffer) == napi_ok;
    }
    if (built && reportLoss)
      built = napi_create_array_with_length(env, 3, &loss) == napi_ok &&
              napi_create_int32(env, sig, &triple[0]) == napi_ok && napi_create_int32(env, code, &triple[1]) == napi_ok &&
              napi_get_boolean(env, over, &triple[2]) == napi_ok && napi_set_element(env, loss, 0, triple[0]) == napi_ok &&
              napi_set_element(env, loss, 1, triple[1]) == napi_ok && napi_set_element(env, loss, 2, triple[2]) == napi_ok;
    napi_value argv[2] = {frames, loss};
    if (built && napi_call_function(env, recv, callback, 2, argv, nullptr) != napi_ok) {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
    napi_close_handle_scope(env, scope);
  }
};

Napi::Value HelperChannel::Define(Napi::Env env) {
  return DefineClass(env, "HelperChannel",
                     {
                         InstanceMethod("send", &HelperChannel::Send),
                         InstanceMethod("call", &HelperChannel::Call),
                         InstanceMethod("ref", &HelperChannel::Ref),
                         InstanceMethod("unref", &HelperChannel::Unref),
                         InstanceMethod("kill", &HelperChannel::Kill),
                         InstanceMethod("setFrameLimit", &HelperChannel::SetFrameLimit),
                         InstanceAccessor("pid", &HelperChannel::Pid, nullptr),
                         InstanceMethod("ended", &HelperChannel::Ended),
                     });
}

HelperChannel::HelperChannel(const Napi::CallbackInfo& info) : Napi::ObjectWrap<HelperChannel>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsArray() || !info[2].IsFunction()) {
    throwNativeError(env, NativeError{ErrorCode::InvalidArgument, "HelperChannel: bad arguments"});
    return;
  }
  std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Array list = info[1].As<Napi::Array>();
  std::vector<std::string> args{path};
  for (uint32_t i = 0; i < list.Length() && i < 16; i++) args.push_back(list.Get(i).ToString().Utf8Value());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throwNativeError(env, NativeError{ErrorCode::OutOfMemory, std::string("socketpair: ") + std::strerror(errno)});
    return;
  }
  // The child's end must not already be fd 3: dup2 onto itself would keep its close-on-exec flag.
  int childEnd = sv[1] > 3 ? sv[1] : ::fcntl(sv[1], F_DUPFD_CLOEXEC, 4);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, childEnd, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char* noEnvironment[] = {nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), noEnvironment);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (childEnd != sv[1]) ::close(childEnd);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    throwNativeError(env, NativeError{ErrorCode::InvalidArgument,
                                      "cannot start the helper process " + path + ": " + std::strerror(rc)});
    return;
  }
  shared_ = std::make_shared<Shared>();
  shared_->fd = sv[0];
  shared_->pid = pid;
  shared_->self = shared_;
  // The environment's teardown frees the function even while the reader holds it: from then on
  // the reader must not touch it (its finalizer runs on the main thread, under mu).
  std::shared_ptr<Shared> finalizing = shared_;
  shared_->tsfn = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "quickjs-native-helper", 0, 1,
                                                [finalizing](Napi::Env) {
                                                  std::lock_guard<std::mutex> lock(finalizing->mu);
                                                  finalizing->tsfnClosed = true;
                                                });
  shared_->tsfn.Unref(env);
  std::thread([s = shared_] { s->readLoop(); }).detach();
}

HelperChannel::~HelperChannel() {
  // The helper reads the end of the channel and exits; the reader reaps it and closes the socket.
  if (shared_) ::shutdown(shared_->fd, SHUT_RDWR);
}

Napi::Value HelperChannel::Send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!shared_ || info.Length() < 1 || !info[0].IsBuffer()) return Napi::Boolean::New(env, false);
  Napi::Buffer<uint8_t> frame = info[0].As<Napi::Buffer<uint8_t>>();
  return Napi::Boolean::New(env, shared_->write(frame.Data(), frame.Length()));
}

Napi::Value HelperChannel::Call(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!shared_ || info.Length() < 2 || !info[0].IsBuffer() || !info[1].IsNumber()) return env.Undefined();
  Napi::Buffer<uint8_t> frame = info[0].As<Napi::Buffer<uint8_t>>();
  double timeoutMs = info[1].As<Napi::Number>().DoubleValue();
  Shared& s = *shared_;
  bool written = frame.Length() == 0 || s.write(frame.Data(), frame.Length());
  std::unique_lock<std::mutex> lock(s.mu);
  // A frame that could not be written got the helper killed: wait for the reader to reap it, so
  // that the caller learns how it ended (ended()).
  if (!written) s.cv.wait(lock, [&] { return s.lost; });
  auto ready = [&] { return !s.direct.empty() || s.lost; };
  auto wait = std::chrono::milliseconds(static_cast<int64_t>(timeoutMs > 0 ? timeoutMs : 0));
  if (!s.cv.wait_for(lock, wait, ready)) {
    s.killHelper();  // a helper that does not answer within the deadline is treated as lost
    s.cv.wait(lock, ready);
  }
  if (s.direct.empty()) return env.Undefined();
  std::vector<uint8_t> reply = std::move(s.direct.front());
  s.direct.pop_front();
  lock.unlock();
  return Napi::Buffer<uint8_t>::Copy(env, reply.data(), reply.size());
}

Napi::Value HelperChannel::Ref(const Napi::CallbackInfo& info) {
  if (!shared_) return info.Env().Undefined();
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!shared_->tsfnClosed) shared_->tsfn.Ref(info.Env());
  return info.Env().Undefined();
}

Napi::Value HelperChannel::Unref(const Napi::CallbackInfo& info) {
  if (!shared_) return info.Env().Undefined();
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!shared_->tsfnClosed) shared_->tsfn.Unref(info.Env());
  return info.Env().Undefined();
}

Napi::Value HelperChannel::Kill(const Napi::CallbackInfo& info) {
  if (shared_) shared_->killHelper();
  return info.Env().Undefined();
}

Napi::Value HelperChannel::SetFrameLimit(const Napi::CallbackInfo& info) {
  if (shared_ && info.Length() >= 1 && info[0].IsNumber()) {
    double bytes = info[0].As<Napi::Number>().DoubleValue();
    double max = static_cast<double>(channel::maxFrameBytes);
    shared_->frameLimit.store(static_cast<uint32_t>(bytes >= 0 && bytes < max ? bytes : max));
  }
  return info.Env().Undefined();
}

Napi::Value HelperChannel::Ended(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!shared_) return env.Undefined();
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (!shared_->lost) return env.Undefined();
  Napi::Array a = Napi::Array::New(env, 3);
  a.Set(0u, Napi::Number::New(env, shared_->termSignal));
  a.Set(1u, Napi::Number::New(env, shared_->exitCode));
  a.Set(2u, Napi::Boolean::New(env, shared_->overLimit));
  return a;
}

Napi::Value HelperChannel::Pid(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), shared_ ? shared_->pid : -1);
}

}  // namespace qjsn

#else  // _WIN32

namespace qjsn {
Napi::Value HelperChannel::Define(Napi::Env env) { return env.Undefined(); }
}  // namespace qjsn

#endif
