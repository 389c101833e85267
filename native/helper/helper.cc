// The helper process of `isolation: "process"` sandboxes: the engine, the codec and a channel,
// nothing else (no Node, no V8). It confines itself (native/helper/confine.h) before it reads a
// frame, then serves the frames of native/boundary.h QJSN_CHANNEL_FRAMES on fd 3 until the parent
// closes the channel. Threads: this one reads frames and answers direct requests; a sync runner
// runs evalSync (its host calls are answered by frames this thread reads meanwhile); the addon's
// Executor runs async evals. Everything the parent sends is length-checked; a frame that does not
// parse ends the helper.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <map>
#include <unordered_map>
#include <utility>

#include "../engine.h"
#include "../executor.h"
#include "../read_full.h"
#include "../threads.h"
#include "confine.h"
#include "frames.h"

namespace qjsn::helper {

namespace {

constexpr int kChannelFd = 3;

// "Create,Dispose,...": the frames this helper was built with, in their order (their numbers).
#define QJSN_FRAME_NAME(name) #name ","
constexpr const char* kFrameNames = QJSN_CHANNEL_FRAMES(QJSN_FRAME_NAME);
#undef QJSN_FRAME_NAME

bool writeFull(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t put = ::write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// The helper's end of the channel: whole frames, written by any thread one at a time.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  void send(FrameOut& frame) {
    const std::vector<uint8_t>& bytes = frame.done();
    std::lock_guard<std::mutex> lock(writeMu_);
    if (!writeFull(fd_, bytes.data(), bytes.size())) _exit(0);  // the parent is gone
  }
  // The next frame; false at the end of the channel or on a header that does not parse.
  bool receive(Frame* frame, uint32_t* sandboxId, std::vector<uint8_t>* body) {
    uint8_t header[channel::headerBytes];
    if (!readFull(fd_, header, sizeof header)) return false;
    uint32_t size = 0;
    std::memcpy(&size, header, 4);
    std::memcpy(sandboxId, header + 8, 4);
    if (size > channel::maxFrameBytes || header[4] >= static_cast<uint8_t>(Frame::Count)) return false;
    *frame = static_cast<Frame>(header[4]);
    body->resize(size);
    return readFull(fd_, body->data(), size);
  }

 private:
  int fd_;
  std::mutex writeMu_;
};

void writeError(FrameOut& out, const std::optional<NativeError>& error) {
  out.u8(error ? 0 : 1);
  if (!error) return;
  out.string(errorCodeName(error->code));
  out.string(error->message);
}

void writeOutcome(FrameOut& out, const EvalOutcome& o) {
  out.u32(static_cast<uint32_t>(o.status));
  out.bytes(o.value);
  out.string(o.message);
  out.u32(static_cast<uint32_t>(o.stop));
  out.bytes(o.console);
  out.u8(o.consoleTruncated ? 1 : 0);
  out.f64(o.executionMs);
  out.u32(o.hostCalls);
  out.f64(static_cast<double>(o.memoryUsedBytes));
  out.f64(static_cast<double>(o.peakMemoryBytes));
  out.f64(static_cast<double>(o.evalId));
  out.u32(static_cast<uint32_t>(o.kind));
  out.u8(o.snapshot ? 1 : 0);
  if (!o.snapshot) return;
  out.u32(static_cast<uint32_t>(o.snapshot->status));
  out.string(o.snapshot->message);
  out.bytes(o.snapshotBody);
  out.u32(static_cast<uint32_t>(o.snapshot->notRestored.size()));
  for (const NotRestored& n : o.snapshot->notRestored) {
    out.string(n.name);
    out.string(n.type);
  }
}

// The outcome of a job that never reached an engine (disposed, busy, broken), as writeOutcome writes it.
void writeRefusal(FrameOut& out, EvalStatus status, uint64_t evalId) {
  out.u32(static_cast<uint32_t>(status));
  out.bytes(nullptr, 0);  // value
  out.string("");
  out.u32(static_cast<uint32_t>(StopReason::None));
  out.bytes(nullptr, 0);  // console
  out.u8(0);
  out.f64(0);
  out.u32(0);
  out.f64(0);
  out.f64(0);
  out.f64(static_cast<double>(evalId));
  out.u32(static_cast<uint32_t>(JobKind::Eval));
  out.u8(0);
}

// UTF-8 (as the parent encodes names) to UTF-16 code units; false on malformed input.
bool utf16Of(const std::string& s, std::u16string* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    uint8_t b = static_cast<uint8_t>(s[i]);
    int extra = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + extra >= s.size() + (extra == 0 ? 1 : 0)) return false;
    uint32_t cp = extra == 0 ? b : b & (0x3f >> extra);
    for (int k = 1; k <= extra; k++) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3f);
    i += 1 + extra;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out->push_back(static_cast<char16_t>(0xd800 + (cp >> 10)));
      out->push_back(static_cast<char16_t>(0xdc00 + (cp & 0x3ff)));
    } else {
      out->push_back(static_cast<char16_t>(cp));
    }
  }
  return true;
}

// Request layout: u32 kind, f64 evalId, f64 budgetMs, u8 describe, u8 streamConsole, u32 resultParts,
// u32 thrownParts, u32 displayDepth, f64 snapshotMaxBytes, string code, string filename,
// u32 excluded count, that many strings, bytes snapshot body.
bool readRequest(FrameIn& in, EvalRequest* r, uint64_t* evalId) {
  uint32_t kind = 0, resultParts = 0, thrownParts = 0, depth = 0, excluded = 0;
  uint8_t describe = 0, stream = 0;
  double id = 0, maxBytes = 0;
  if (!in.u32(&kind) || kind >= static_cast<uint32_t>(JobKind::Count) || !in.f64(&id) || !in.f64(&r->executionBudgetMs) ||
      !in.u8(&describe) || !in.u8(&stream) || !in.u32(&resultParts) || !in.u32(&thrownParts) || !in.u32(&depth) ||
      !in.f64(&maxBytes) || !in.string(&r->code) || !in.string(&r->filename) || !in.u32(&excluded))
    return false;
  for (uint32_t i = 0; i < excluded; i++) {
    std::string name;
    std::u16string units;
    if (!in.string(&name) || !utf16Of(name, &units)) return false;
    r->snapshotExclude.insert(std::move(units));
  }
  if (!in.bytes(&r->snapshotBody)) return false;
  if (!(id >= 0 && id < 9007199254740992.0) || !(maxBytes >= 0 && maxBytes < 9007199254740992.0)) return false;
  r->kind = static_cast<JobKind>(kind);
  *evalId = static_cast<uint64_t>(id);
  r->describeUnserializable = describe != 0;
  r->streamConsole = stream != 0;
  r->resultDisplay = {resultParts, depth};
  r->thrownDisplay = {thrownParts, depth};
  r->snapshotMaxBytes = static_cast<uint64_t>(maxBytes);
  return true;
}

bool readHostResult(FrameIn& in, HostResult* r) {
  uint8_t ok = 0;
  if (!in.u8(&ok)) return false;
  r->ok = ok != 0;
  if (r->ok) return in.bytes(&r->value);
  return in.string(&r->errorName) && in.string(&r->errorMessage);
}

// True on the threads of SyncRunners: their host calls answer the parent's blocked direct request.
thread_local bool onSyncRunner = false;

// The HostBridge of the engines of this process: host calls and outcomes become frames.
class ChannelBridge : public HostBridge {
 public:
  explicit ChannelBridge(Channel& channel) : channel_(channel) {}

  HostResult callSync(uint32_t sandboxId, uint32_t fnId, std::vector<uint8_t> args) override {
    Slot slot;
    uint32_t token;
    {
      std::lock_guard<std::mutex> lock(mu_);
      token = ++lastToken_;
      if (token == 0) token = ++lastToken_;
      slots_[token] = &slot;
    }
    FrameOut out(Frame::SyncCall, sandboxId, onSyncRunner);
    out.u32(fnId);
    out.u32(token);
    out.bytes(args);
    channel_.send(out);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return slot.done; });
    return std::move(slot.result);
  }
  bool callSyncPrimitive(uint32_t, PrimitiveCall* call) override {
    // Never called: engines of this process are created with primitiveHostCalls off.
    call->fallback = HostResult{0, false, {}, "Error", "no primitive host calls in a helper"};
    return false;
  }
  void postAsyncCall(uint32_t sandboxId, uint64_t evalId, uint32_t callId, uint32_t fnId,
                     std::vector<uint8_t> args) override {
    FrameOut out(Frame::AsyncCall, sandboxId, false);
    out.f64(static_cast<double>(evalId));
    out.u32(callId);
    out.u32(fnId);
    out.bytes(args);
    channel_.send(out);
  }
  void postEvalDone(uint32_t sandboxId, EvalOutcome outcome) override {
    FrameOut out(Frame::EvalDone, sandboxId, false);
    writeOutcome(out, outcome);
    channel_.send(out);
  }
  void postConsole(uint32_t sandboxId, uint64_t evalId, int level, std::vector<uint8_t> args) override {
    FrameOut out(Frame::Console, sandboxId, false);
    out.f64(static_cast<double>(evalId));
    out.u32(static_cast<uint32_t>(level));
    out.bytes(args);
    channel_.send(out);
  }
  bool onMainThread() const override { return false; }

  // The parent's answer to the sync host call `token`; unknown tokens are ignored.
  void answer(uint32_t token, HostResult r) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(token);
    if (it == slots_.end()) return;
    it->second->result = std::move(r);
    it->second->done = true;
    slots_.erase(it);
    cv_.notify_all();
  }

 private:
  struct Slot {
    bool done = false;
    HostResult result;
  };
  Channel& channel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint32_t, Slot*> slots_;
  uint32_t lastToken_ = 0;
};

// Runs evalSync requests (and sync snapshot writes and reads) on threads of their own (the reader
// must stay free to read the answers to their host calls) and answers each with a direct Reply.
// A host function of one may run an evalSync of another sandbox of this helper, which then needs a
// thread of its own while the first waits: a thread is started whenever none is idle.
class SyncRunners {
 public:
  explicit SyncRunners(Channel& channel) : channel_(channel) {}
  void run(uint32_t sandboxId, std::shared_ptr<Engine> engine, EvalRequest request) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(Job{sandboxId, std::move(engine), std::move(request)});
    if (idle_ == 0) {
      idle_++;  // counted before it starts, so that the next job does not start another
      startThread(&SyncRunners::body, this, Executor::kThreadStackBytes);
    }
    cv_.notify_one();
  }

 private:
  struct Job {
    uint32_t sandboxId;
    std::shared_ptr<Engine> engine;
    EvalRequest request;
  };
  // What the in-process tier runs on the Node main thread: an evalSync, or a snapshot write or read.
  static EvalOutcome runDirect(Engine& engine, EvalRequest r) {
    if (r.kind == JobKind::WriteSnapshot) {
      EvalOutcome o;
      o.kind = r.kind;
      o.snapshot = engine.writeSnapshot(r.snapshotExclude, r.snapshotMaxBytes, &o.snapshotBody);
      return o;
    }
    if (r.kind == JobKind::ReadSnapshot) {
      EvalOutcome o;
      o.kind = r.kind;
      o.snapshot = engine.readSnapshot(r.snapshotBody.data(), r.snapshotBody.size(), r.executionBudgetMs);
      return o;
    }
    return engine.evalSync(std::move(r));
  }
  static void* body(void* self) {
    static_cast<SyncRunners*>(self)->loop();
    return nullptr;
  }
  void loop() {
    onSyncRunner = true;
    while (true) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);  // idle_ counts this thread while it waits here
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
        idle_--;
      }
      EvalOutcome o = runDirect(*job.engine, std::move(job.request));
      job.engine.reset();
      FrameOut out(Frame::Reply, job.sandboxId, true);
      writeOutcome(out, o);
      channel_.send(out);
      std::lock_guard<std::mutex> lock(mu_);
      idle_++;
    }
  }
  Channel& channel_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  int idle_ = 0;  // threads waiting for a job (or started to)
};

class Helper {
 public:
  explicit Helper(int fd) : channel_(fd), bridge_(std::make_shared<ChannelBridge>(channel_)), runners_(channel_) {}

  int serve() {
    Frame frame;
    uint32_t id = 0;
    std::vector<uint8_t> body;
    while (channel_.receive(&frame, &id, &body)) {
      FrameIn in(body.data(), body.size());
      if (!handle(frame, id, in)) return 2;  // a frame that does not parse: the parent is confused
    }
    return 0;
  }

 private:
  void reply(FrameOut& out) { channel_.send(out); }
  std::shared_ptr<Engine> engineOf(uint32_t id) {
    auto it = engines_.find(id);
    return it == engines_.end() ? nullptr : it->second;
  }
  void replyError(uint32_t id, const std::optional<NativeError>& error) {
    FrameOut out(Frame::Reply, id, true);
    writeError(out, error);
    reply(out);
  }
  static NativeError gone() { return NativeError{ErrorCode::Disposed, "the sandbox is disposed"}; }

  bool handle(Frame frame, uint32_t id, FrameIn& in) {
    std::shared_ptr<Engine> engine = engineOf(id);
    // As the in-process handle's Needs::Idle methods: nothing but the eval touches a busy engine.
    bool needsIdle = frame == Frame::DefineFunction || frame == Frame::SetGlobal || frame == Frame::GetGlobal ||
                     frame == Frame::GlobalNames || frame == Frame::DefineFrozen;
    if (needsIdle && engine && engine->busy()) {
      replyError(id, NativeError{ErrorCode::Busy, "an eval is running in this sandbox"});
      return true;
    }
    switch (frame) {
      case Frame::Create: return create(id, in);
      case Frame::Dispose: release(id); return true;
      case Frame::DefineFunction: {
        std::string path;
        uint32_t fnId = 0;
        uint8_t async = 0;
        if (!in.string(&path) || !in.u32(&fnId) || !in.u8(&async)) return false;
        replyError(id, engine ? engine->defineFunction(path, fnId, async != 0) : gone());
        return true;
      }
      case Frame::SetGlobal: {
        std::string name;
        std::vector<uint8_t> bytes;
        if (!in.string(&name) || !in.bytes(&bytes)) return false;
        replyError(id, engine ? engine->setGlobal(name, bytes.data(), bytes.size()) : gone());
        return true;
      }
      case Frame::GetGlobal: {
        std::string name;
        if (!in.string(&name)) return false;
        std::vector<uint8_t> value;
        std::optional<NativeError> error = engine ? engine->getGlobal(name, &value) : gone();
        FrameOut out(Frame::Reply, id, true);
        writeError(out, error);
        if (!error) out.bytes(value);
        reply(out);
        return true;
      }
      case Frame::GlobalNames: {
        uint32_t limit = 0;
        if (!in.u32(&limit)) return false;
        if (!engine) {
          replyError(id, gone());
          return true;
        }
        std::vector<std::string> names = engine->globalNames(limit);
        FrameOut out(Frame::Reply, id, true);
        writeError(out, std::nullopt);
        out.u32(static_cast<uint32_t>(names.size()));
        for (const std::string& name : names) out.string(name);
        reply(out);
        return true;
      }
      case Frame::DefineFrozen: {
        std::string name;
        uint32_t fnId = 0;
        if (!in.string(&name) || !in.u32(&fnId)) return false;
        bool installed = false;
        std::optional<NativeError> error = engine ? engine->defineFrozenFunction(name, fnId, &installed) : gone();
        FrameOut out(Frame::Reply, id, true);
        writeError(out, error);
        if (!error) out.u8(installed ? 1 : 0);
        reply(out);
        return true;
      }
      case Frame::MemoryUsage: {
        FrameOut out(Frame::Reply, id, true);
        out.f64(engine ? static_cast<double>(engine->memoryUsed()) : 0);
        out.f64(engine ? static_cast<double>(engine->memoryPeak()) : 0);
        out.f64(engine ? static_cast<double>(engine->memoryLimit()) : 0);
        reply(out);
        return true;
      }
      case Frame::SetClock: {
        uint8_t fixed = 0, utc = 0;
        double epochMs = 0;
        if (!in.u8(&fixed) || !in.f64(&epochMs) || !in.u8(&utc)) return false;
        okReply(id, engine && engine->setClock(fixed != 0, epochMs, utc != 0));
        return true;
      }
      case Frame::SetRandomSeed: {
        double seed = 0;
        if (!in.f64(&seed)) return false;
        okReply(id, engine && seed >= 0 && seed < 9007199254740992.0 && engine->setRandomSeed(static_cast<uint64_t>(seed)));
        return true;
      }
      case Frame::EvalSync: {
        EvalRequest r;
        uint64_t evalId = 0;
        if (!readRequest(in, &r, &evalId)) return false;
        if (!engine) {
          FrameOut out(Frame::Reply, id, true);
          writeRefusal(out, EvalStatus::Disposed, 0);
          reply(out);
          return true;
        }
        runners_.run(id, std::move(engine), std::move(r));
        return true;
      }
      case Frame::Start: {
        dropAppended(id);  // an ended eval's
        EvalRequest r;
        uint64_t evalId = 0;
        if (!readRequest(in, &r, &evalId)) return false;
        if (engine && engine->beginAsync(std::move(r), evalId)) {
          Executor::instance().schedule(engine);
          return true;
        }
        FrameOut out(Frame::EvalDone, id, false);
        writeRefusal(out,
                     !engine            ? EvalStatus::Disposed
                     : engine->broken() ? EvalStatus::Broken
                                        : EvalStatus::Busy,
                     evalId);
        reply(out);
        return true;
      }
      case Frame::Stop: {
        uint32_t reason = 0;
        double evalId = 0;
        if (!in.u32(&reason) || !in.f64(&evalId)) return false;
        auto why = static_cast<StopReason>(reason);
        if (!engine || (why != StopReason::WallBudget && why != StopReason::Abort) || !(evalId >= 0)) return true;
        if (engine->requestStop(why, static_cast<uint64_t>(evalId))) Executor::instance().schedule(engine);
        Executor::instance().stopRequested(engine.get());
        return true;
      }
      case Frame::AppendResult: {
        uint32_t callId = 0;
        std::vector<uint8_t> piece;
        if (!in.u32(&callId) || !in.bytes(&piece)) return false;
        std::vector<uint8_t>& gathered = appended_[{id, callId}];
        gathered.insert(gathered.end(), piece.begin(), piece.end());
        return true;
      }
      case Frame::Settle: {
        HostResult r;
        if (!in.u32(&r.callId) || !readHostResult(in, &r)) return false;
        auto gathered = appended_.find({id, r.callId});
        if (gathered != appended_.end()) {
          if (r.ok && r.value.empty()) r.value = std::move(gathered->second);
          appended_.erase(gathered);
        }
        if (engine && engine->deliver(std::move(r))) Executor::instance().schedule(engine);
        return true;
      }
      case Frame::AnswerSync: {
        uint32_t token = 0;
        HostResult r;
        if (!in.u32(&token) || !readHostResult(in, &r)) return false;
        bridge_->answer(token, std::move(r));
        return true;
      }
      case Frame::TestHook: return testHook(in);
      default: return false;
    }
  }

  void okReply(uint32_t id, bool ok) {
    FrameOut out(Frame::Reply, id, true);
    out.u8(ok ? 1 : 0);
    reply(out);
  }

  bool create(uint32_t id, FrameIn& in) {
    double v[6];
    for (double& d : v)
      if (!in.f64(&d) || !(d >= 0)) return false;
    EngineOptions o;
    auto u64 = [](double d) { return d >= 18446744073709551615.0 ? UINT64_MAX : static_cast<uint64_t>(d); };
    o.memoryLimitBytes = static_cast<size_t>(u64(v[0]));
    o.maxStackSizeBytes = static_cast<size_t>(u64(v[1]));
    o.captureConsole = v[2] != 0;
    o.maxConsoleBytes = static_cast<size_t>(u64(v[3]));
    o.copyLimitBytes = u64(v[4]);
    o.maxHostCallsInFlight = u64(v[5]);
    o.primitiveHostCalls = false;
    if (engines_.count(id) != 0) {
      replyError(id, NativeError{ErrorCode::InvalidArgument, "a sandbox with this number exists"});
      return true;
    }
    auto engine = std::make_shared<Engine>(id, o, bridge_);
    if (!engine->valid()) {
      replyError(id, engine->creationFailure());
      return true;
    }
    engines_[id] = std::move(engine);
    replyError(id, std::nullopt);
    return true;
  }

  // Drops the pieces gathered for calls of sandbox `id` that were never settled.
  void dropAppended(uint32_t id) {
    appended_.erase(appended_.lower_bound({id, 0}), appended_.upper_bound({id, UINT32_MAX}));
  }

  void release(uint32_t id) {
    dropAppended(id);
    auto it = engines_.find(id);
    if (it == engines_.end()) return;
    std::shared_ptr<Engine> engine = std::move(it->second);
    engines_.erase(it);
    Engine::AfterDispose after = engine->dispose();
    Executor::instance().stopRequested(engine.get());
    if (after == Engine::AfterDispose::Schedule) Executor::instance().schedule(engine);
  }

  bool testHook(FrameIn& in) {
    uint32_t what = 0;
    if (!in.u32(&what)) return false;
#if defined(QJSN_TEST_HOOKS)
    testHookRun(what);
    return true;
#else
    return false;  // a release helper knows no test hooks: the frame does not parse
#endif
  }

  Channel channel_;
  std::shared_ptr<ChannelBridge> bridge_;
  SyncRunners runners_;
  std::unordered_map<uint32_t, std::shared_ptr<Engine>> engines_;
  // Pieces of results handed over with AppendResult, by (sandbox, call), until their Settle.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint8_t>> appended_;
};

}  // namespace

}  // namespace qjsn::helper

int main(int argc, char** argv) {
  using namespace qjsn::helper;
  // argv: [1] the address-space cap in bytes (0: none), [2] "confined" or "unconfined", [3] the
  // frame names the parent was built with: a helper built from other sources refuses to serve.
  if (argc < 4 || std::string(argv[3]) != kFrameNames) return 71;
  unsigned long long addressSpace = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 0;
  bool confined = argc > 2 && std::string(argv[2]) == "confined";
  qjsn::Executor::instance().prepare();
  if (confined && !confine(kChannelFd, addressSpace)) return 70;
  // Frames are served on a thread of known stack (the engine measures its stack budget from the
  // thread's bounds, which for the main thread glibc would read from /proc, closed by the filter).
  static Helper helper(kChannelFd);
  qjsn::startThread(
      [](void*) -> void* {
        // The parent closed the channel (or sent what does not parse): end at once, without
        // unwinding threads that may be running guest code.
        _exit(helper.serve());
      },
      nullptr, qjsn::Executor::kThreadStackBytes);
  std::mutex forever;
  std::condition_variable never;
  std::unique_lock<std::mutex> lock(forever);
  never.wait(lock, [] { return false; });
}
