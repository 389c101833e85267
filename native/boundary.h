// The JS <-> native contract, declared once. Each list below is an X-macro: C++ builds its enums
// and structs from it, and native/contract.cc exports the same lists at load as the frozen
// `contract` object that src/native.ts reads, so no number or name of the boundary is written twice.
#pragma once

#include <cstdint>
#include <string>

namespace qjsn {

// How an eval (or a direct call) ended. X(name)
#define QJSN_EVAL_STATUSES(X)                                                                   \
  X(Ok)                                                                                         \
  X(GuestError)                                                                                 \
  X(SyntaxError)                                                                                \
  X(Timeout)                                                                                    \
  X(OutOfMemory)                                                                                \
  X(StackOverflow)                                                                              \
  X(Aborted)                                                                                    \
  X(Disposed)                                                                                   \
  X(Unserializable)                                                                             \
  X(Broken)                                                                                     \
  X(Busy)                                                                                       \
  X(CopyLimit)     /* the eval handed the host more than copyLimitBytes; message says what */   \
  X(HostCallLimit) /* the eval had more async host calls in flight than maxHostCallsInFlight */ \
  X(WorkerLost)    /* the helper process of an isolation: "process" sandbox died (src/process-tier/) */

// Why guest code is being stopped. Written by any thread, read by the interrupt handler. X(name)
#define QJSN_STOP_REASONS(X) X(None) X(ExecutionBudget) X(WallBudget) X(Abort) X(Dispose) X(CopyLimit) X(HostCallLimit)

// How a snapshot read or write ended. X(name)
#define QJSN_SNAPSHOT_STATUSES(X)                                             \
  X(Ok)                                                                       \
  X(TooLarge)       /* over the byte, node or depth cap */                    \
  X(Invalid)        /* malformed body */                                      \
  X(OutOfMemory)    /* the engine raised while building values */             \
  X(Interrupted)    /* the time budget ran out while re-creating functions */ \
  X(StackExhausted) /* the calling thread has too little stack left: nothing was read */

// Codes of the failures every direct call (the constructor, defineFunction, setGlobal, getGlobal,
// start, snapshots...) returns or throws as { code, message }: the SandboxError codes of
// src/errors.ts. X(name, code)
#define QJSN_ERROR_CODES(X)              \
  X(Busy, "BUSY")                        \
  X(Disposed, "DISPOSED")                \
  X(Broken, "BROKEN")                    \
  X(StackOverflow, "STACK_OVERFLOW")     \
  X(OutOfMemory, "OUT_OF_MEMORY")        \
  X(Unserializable, "UNSERIALIZABLE")    \
  X(InvalidArgument, "INVALID_ARGUMENT") \
  X(WorkerLost, "WORKER_LOST")

// Wire tags (format in native/wire.h). X(name, byte)
#define QJSN_WIRE_TAGS(X)                                                                                             \
  X(Undefined, 0x00)                                                                                                  \
  X(Null, 0x01)                                                                                                       \
  X(False, 0x02)                                                                                                      \
  X(True, 0x03)                                                                                                       \
  X(Int32, 0x04)       /* i32 */                                                                                      \
  X(Float64, 0x05)     /* f64 */                                                                                      \
  X(BigInt, 0x06)      /* decimal text as a string payload (sign included); read only, from snapshot format 1:      \
                      decimal conversion is quadratic, so writers use BigIntHex */ \
  X(String, 0x07)      /* string */                                                                                   \
  X(Array, 0x08)       /* u32 length, u32 count, count * (u32 index, value) */                                        \
  X(Object, 0x09)      /* u8 flags (1 = null prototype, 2 = class name), [string], u32 count, count * (key, value) */ \
  X(Date, 0x0a)        /* f64 time value */                                                                           \
  X(RegExp, 0x0b)      /* string source, string flags */                                                              \
  X(Map, 0x0c)         /* u32 count, count * (key, value) */                                                          \
  X(Set, 0x0d)         /* u32 count, count * value */                                                                 \
  X(ArrayBuffer, 0x0e) /* u32 byteLength, bytes */                                                                    \
  X(TypedArray, 0x0f)  /* u8 kind, value (ArrayBuffer or BackRef to one), u32 byteOffset, u32 length. Across the \
                          boundary a view brings a private copy of exactly its bytes (offset 0); it refers to a    \
                          buffer only when that buffer itself was written earlier in the same value. Snapshot      \
                          bodies keep the guest's sharing. */    \
  X(Error, 0x10)       /* string name, string message, value stack (String or Undefined) */                           \
  X(BackRef, 0x11)     /* u32 object number */                                                                        \
  X(Opaque, 0x12)      /* u8 OpaqueKind, string name: a value that cannot be copied, described */                     \
  /* 0x13: never assigned (a Symbol tag was once reserved; symbols cross as Opaque) */                                \
  X(Latin1, 0x14) /* u32 length, bytes: a string whose units all fit in one byte */                                   \
  /* Snapshot bodies only (native/snapshot.h): */                                                                     \
  X(Function, 0x15)    /* u32 size, UTF-8 source text, then own properties and prototype properties, each as u32   \
                        count, count * (string key, value) */  \
  X(Prototype, 0x16)   /* value (a Function): that function's `prototype` object */                                   \
  X(Instance, 0x17)    /* value (the prototype object), u32 count, count * (string key, value) */                     \
  X(Placeholder, 0x18) /* string type, string name: a value that was not stored; reading it throws */                 \
  X(Accessor, 0x19)    /* value getter, value setter (each a Function or Undefined): an accessor property */          \
  X(BigIntHex, 0x1a)   /* string payload: "-"? then lower-case hex digits of the magnitude (linear both ways) */      \
  X(ReportedPlaceholder, 0x1b) /* as Placeholder, carried over from an earlier restore that already reported it */    \
  /* Copies for display only (guest -> host): */                                                                      \
  X(More, 0x1c) /* u32 entries in all: the last entry of an Object, Map or Set a copy for display cut short, in the \
                   place of a key (Set: of a value), with no value after it */

// Typed array kinds in the wire format (independent of either engine's enums), in order. X(name)
#define QJSN_TYPED_KINDS(X) \
  X(Int8)                   \
  X(Uint8)                  \
  X(Uint8Clamped)           \
  X(Int16)                  \
  X(Uint16)                 \
  X(Int32)                  \
  X(Uint32)                 \
  X(Float32)                \
  X(Float64)                \
  X(BigInt64)               \
  X(BigUint64)              \
  X(Float16)                \
  X(DataView) /* length counts bytes */

// What an Opaque placeholder stands for, and how it reads in messages. X(name, text)
#define QJSN_OPAQUE_KINDS(X)           \
  X(Function, "function")              \
  X(Symbol, "symbol")                  \
  X(Accessor, "accessor")              \
  X(Proxy, "proxy")                    \
  X(Promise, "promise")                \
  X(WeakCollection, "weak collection") \
  X(Other, "object")

// Console methods, by the level number a console line carries. X(name)
#define QJSN_CONSOLE_LEVELS(X) X(log) X(info) X(warn) X(error) X(debug)

// Positions in the array an async job resolves with. X(name)
#define QJSN_OUTCOME_SLOTS(X)             \
  X(status)                               \
  X(value)                                \
  X(message)                              \
  X(stop)                                 \
  X(console)                              \
  X(consoleTruncated)                     \
  X(executionMs)                          \
  X(hostCalls)                            \
  X(memoryUsedBytes)                      \
  X(peakMemoryBytes)                      \
  X(kind)     /* the request's JobKind */ \
  X(snapshot) /* a snapshot job's read or write (QJSN_SNAPSHOT_RESULT_SLOTS), when it ran */

// Positions in the array a snapshot read or write answers with. X(name)
#define QJSN_SNAPSHOT_RESULT_SLOTS(X)                                  \
  X(status)      /* a SnapshotStatus */                                \
  X(result)      /* a write's body when Ok; else what failed (text) */ \
  X(notRestored) /* [name, type, ...] of the placeholders written or read */

// What a job does, in its request and its outcome. X(name)
#define QJSN_JOB_KINDS(X)                                                                            \
  X(Eval)                                                                                            \
  X(EvalThenSnapshot) /* an eval, then (when it was not stopped) a snapshot write in the same job */ \
  X(WriteSnapshot)    /* no guest code runs; its cost grows with the guest's state */                \
  X(ReadSnapshot)     /* a restore: re-creating functions and classes runs guest code, under budgetMs */

// Slots of the shared Float64Array (`request`) a job's numbers travel in, written by src/ just
// before the call that reads them: evalSync, start, and the main-thread snapshot calls. Only code,
// filename and byte payloads (snapshot body, excluded names) travel as arguments. X(name)
#define QJSN_REQUEST_SLOTS(X)                                                                          \
  X(kind)             /* a JobKind */                                                                  \
  X(sandboxId)        /* evalSync: the sandbox it runs in */                                           \
  X(evalId)           /* async jobs: the number stop() and the outcome name it by */                   \
  X(budgetMs)         /* execution budget (ReadSnapshot: of re-creating functions and classes) */      \
  X(describe)         /* 1: a value that cannot be copied comes back described */                      \
  X(streamConsole)    /* 1: each console line also goes to the dispatcher as it is written */          \
  X(runInline)        /* 1: the job runs on the calling thread */                                      \
  X(answerNow)        /* 1: an outcome ready within the main thread's short wait comes back at once */ \
  X(resultParts)      /* copy for display of the result: at most this many parts (0: exact) */         \
  X(thrownParts)      /* ... of a thrown value */                                                      \
  X(displayDepth)     /* ... and no entries of containers nested deeper */                             \
  X(snapshotMaxBytes) /* EvalThenSnapshot, WriteSnapshot: the cap on the body */

// Slots of the shared Float64Array (`createSlots`) new SandboxHandle(dispatcher, primitiveDispatcher)
// reads its options from. X(name)
#define QJSN_CREATE_SLOTS(X) \
  X(memoryLimitBytes)        \
  X(maxStackSizeBytes)       \
  X(captureConsole)          \
  X(maxConsoleBytes)         \
  X(copyLimitBytes)          \
  X(maxHostCallsInFlight)

// Slots of the shared Float64Array (`callSlots`) the numbers of the handle's other calls travel in,
// written by src/request.ts just before the call that reads them (SandboxHandle reads each by
// name, before anything that could run JavaScript). Only payloads without ids travel as arguments:
// paths and names, a host call's result. X(name)
#define QJSN_CALL_SLOTS(X)                                                                                  \
  X(evalId)       /* stop: the async eval it names */                                                       \
  X(reason)       /* stop: a StopReason, WallBudget or Abort */                                             \
  X(callId)       /* settle, appendResult: the async host call; answerSync: the parked sync call's token */ \
  X(ok)           /* settle: 1: the result is a value, else [name, message] */                              \
  X(collect)      /* settle: 1: the guest's next host call may be dispatched before it returns */           \
  X(resultBytes)  /* appendResult: the size of the whole encoded result the pieces add up to */             \
  X(fnId)         /* defineFunction, defineFrozenFunction: the number the dispatcher is called with */      \
  X(async)        /* defineFunction: 1: the guest's calls return promises */                                \
  X(limit)        /* globalNames: at most this many names */                                                \
  X(clockFixed)   /* setClock: 1: Date.now() reads epochMs */                                               \
  X(epochMs)      /* setClock */                                                                            \
  X(localTimeUtc) /* setClock: 1: local time is UTC */                                                      \
  X(seed)         /* setRandomSeed: an integer below 2**53 */

// Positions in the array of what an eval answered on the spot (evalSync, start with answerNow)
// hands back besides its stats: only what did not fit the stats and the exchange buffer. X(name)
#define QJSN_ANSWERED_SLOTS(X)                                                    \
  X(value) /* the value's wire bytes when they did not fit the exchange buffer */ \
  X(message)                                                                      \
  X(console) /* the console records, when there are any */

// Positions in the shared Float64Array an inline eval leaves its numbers in. X(name)
#define QJSN_STATS_SLOTS(X) \
  X(status)                 \
  X(stop)                   \
  X(consoleTruncated)       \
  X(executionMs)            \
  X(hostCalls)              \
  X(memoryUsedBytes)        \
  X(peakMemoryBytes)        \
  X(valueLength) /* of the value in the exchange buffer, or -1 */

// Positions in the shared Float64Array the primitive fast path (sync host calls of inline evals)
// passes numbers through, so that they cross without a Node-API call each. X(name)
#define QJSN_PRIMITIVE_SLOTS(X)                                                         \
  X(call) /* from the addon: fnId * 32 + (bit i: argument i is in arg<i>) * 4 + argc */ \
  X(arg0) /* the number arguments */                                                    \
  X(arg1)                                                                               \
  X(arg2)                                                                               \
  X(result)    /* from the dispatcher: its number answer ... */                         \
  X(hasResult) /* ... when this is 1 (the addon sets it back to 0) */

// What a dispatcher call carries (its first argument). X(name)
#define QJSN_DISPATCH_KINDS(X) X(SyncCall) X(AsyncCall) X(Console)

// Caps on one encoded value, shared by both directions, the TypeScript encoder and the snapshot
// reader. X(name, C++ type, value)
#define QJSN_COPY_LIMITS(X)      \
  X(maxDepth, uint32_t, 512)     \
  X(maxNodes, uint32_t, 2000000) \
  X(maxBytes, uint64_t, 256ull << 20)

// Fixed sizes of the boundary. X(name, value)
#define QJSN_BOUNDARY_SIZES(X)                                                            \
  X(exchangeBytes, 64 * 1024) /* the buffer shared for host call arguments and results */ \
  X(maxPrimitiveArgs, 3)      /* a sync host call with more arguments takes the codec */  \
  X(maxPrimitiveChars, 256)   /* ... as does one with a longer string argument */         \
  X(hostCallStateBytes, 1024) /* what the host holds per async call in flight, counted against copyLimitBytes */

// Frames of the channel between the addon and a helper process (native/helper/; the layout is in
// native/helper/frames.h and src/process-tier/frames.ts). Parent -> helper, then helper -> parent. X(name)
#define QJSN_CHANNEL_FRAMES(X)                                                                                        \
  X(Create)         /* 6 x f64 create options -> Reply (u8 ok, [string code, string message]) */                      \
  X(Dispose)        /* no reply */                                                                                    \
  X(DefineFunction) /* string path, u32 fnId, u8 async -> Reply (error) */                                            \
  X(SetGlobal)      /* string name, bytes wire -> Reply (error) */                                                    \
  X(GetGlobal)      /* string name -> Reply (u8 ok, bytes | error) */                                                 \
  X(MemoryUsage)    /* -> Reply (f64 used, f64 peak, f64 limit) */                                                    \
  X(SetClock)       /* u8 fixed, f64 epochMs, u8 utc -> Reply (u8 ok) */                                              \
  X(SetRandomSeed)  /* f64 seed -> Reply (u8 ok) */                                                                   \
  X(EvalSync)       /* request (Eval, WriteSnapshot, ReadSnapshot) -> direct SyncCall frames, then Reply (outcome) */ \
  X(Start)          /* request -> EvalDone (outcome) later */                                                         \
  X(Stop)           /* u32 reason, f64 evalId */                                                                      \
  X(Settle)         /* u32 callId, u8 ok, bytes (empty: what AppendResult gathered) | string name, string message */  \
  X(AnswerSync)     /* u32 token, u8 ok, bytes | string name, string message */                                       \
  X(GlobalNames)    /* u32 limit -> Reply (error, then u32 count, that many strings) */                               \
  X(DefineFrozen)   /* string name, u32 fnId -> Reply (error, then u8 installed) */                                   \
  X(TestHook)       /* u32 what: only in helpers built with QJSN_TEST_HOOKS (CMake) */                                \
  X(Reply)          /* the answer to a direct request */                                                              \
  X(SyncCall)       /* u32 fnId, u32 token, bytes args */                                                             \
  X(AsyncCall)      /* f64 evalId, u32 callId, u32 fnId, bytes args */                                                \
  X(Console)        /* f64 evalId, u32 level, bytes args */                                                           \
  X(EvalDone)       /* outcome */                                                                                     \
  X(AppendResult)   /* u32 callId, bytes piece: gathered for the call's Settle */

// Fixed sizes of the channel to a helper process. X(name, value)
#define QJSN_CHANNEL_SIZES(X)                                                                     \
  X(headerBytes, 12)           /* u32 body length, u8 frame, u8 flags, u16 zero, u32 sandboxId */ \
  X(maxFrameBytes, 0x10100000) /* the largest body either side accepts: maxBytes + 1 MiB */       \
  X(directFlag, 1)             /* flags: the frame answers the parent's blocked direct request */

#define QJSN_ENUMERATOR(name, ...) name,
#define QJSN_COUNT(...) +1

enum class EvalStatus : int { QJSN_EVAL_STATUSES(QJSN_ENUMERATOR) };
enum class StopReason : int { QJSN_STOP_REASONS(QJSN_ENUMERATOR) };
enum class SnapshotStatus : int { QJSN_SNAPSHOT_STATUSES(QJSN_ENUMERATOR) };
enum class ErrorCode : int { QJSN_ERROR_CODES(QJSN_ENUMERATOR) };
enum class OpaqueKind : uint8_t { QJSN_OPAQUE_KINDS(QJSN_ENUMERATOR) };
enum class TypedKind : uint8_t { QJSN_TYPED_KINDS(QJSN_ENUMERATOR) Count };
enum class OutcomeSlot : uint32_t { QJSN_OUTCOME_SLOTS(QJSN_ENUMERATOR) };
enum class SnapshotResultSlot : uint32_t { QJSN_SNAPSHOT_RESULT_SLOTS(QJSN_ENUMERATOR) };
enum class StatsSlot : uint32_t { QJSN_STATS_SLOTS(QJSN_ENUMERATOR) };
enum class AnsweredSlot : uint32_t { QJSN_ANSWERED_SLOTS(QJSN_ENUMERATOR) };
enum class JobKind : int { QJSN_JOB_KINDS(QJSN_ENUMERATOR) Count };
enum class RequestSlot : uint32_t { QJSN_REQUEST_SLOTS(QJSN_ENUMERATOR) };
enum class CreateSlot : uint32_t { QJSN_CREATE_SLOTS(QJSN_ENUMERATOR) };
enum class CallSlot : uint32_t { QJSN_CALL_SLOTS(QJSN_ENUMERATOR) };
enum class PrimitiveSlot : uint32_t { QJSN_PRIMITIVE_SLOTS(QJSN_ENUMERATOR) };
enum class DispatchKind : int { QJSN_DISPATCH_KINDS(QJSN_ENUMERATOR) };
enum class Frame : uint8_t { QJSN_CHANNEL_FRAMES(QJSN_ENUMERATOR) Count };

#define QJSN_TAG_ENUMERATOR(name, byte) name = byte,
enum class Tag : uint8_t { QJSN_WIRE_TAGS(QJSN_TAG_ENUMERATOR) };
#undef QJSN_TAG_ENUMERATOR

constexpr uint32_t kStatsSlots = 0 QJSN_STATS_SLOTS(QJSN_COUNT);
constexpr uint32_t kAnsweredSlots = 0 QJSN_ANSWERED_SLOTS(QJSN_COUNT);
constexpr uint32_t kOutcomeSlots = 0 QJSN_OUTCOME_SLOTS(QJSN_COUNT);
constexpr uint32_t kSnapshotResultSlots = 0 QJSN_SNAPSHOT_RESULT_SLOTS(QJSN_COUNT);
constexpr uint32_t kPrimitiveSlots = 0 QJSN_PRIMITIVE_SLOTS(QJSN_COUNT);
constexpr uint32_t kRequestSlots = 0 QJSN_REQUEST_SLOTS(QJSN_COUNT);
constexpr uint32_t kCreateSlots = 0 QJSN_CREATE_SLOTS(QJSN_COUNT);
constexpr uint32_t kCallSlots = 0 QJSN_CALL_SLOTS(QJSN_COUNT);

#define QJSN_SIZE_CONSTANT(name, value) constexpr uint32_t name = value;
namespace boundary {
QJSN_BOUNDARY_SIZES(QJSN_SIZE_CONSTANT)
}
namespace channel {
QJSN_CHANNEL_SIZES(QJSN_SIZE_CONSTANT)
}
#undef QJSN_SIZE_CONSTANT

// A failure of a direct call, as it crosses to TypeScript: a typed code and what happened.
struct NativeError {
  ErrorCode code;
  std::string message;
};

// The texts of the lists that carry one, by enumerator.
#define QJSN_SECOND_TEXT(name, text) text,
constexpr const char* kErrorCodeNames[] = {QJSN_ERROR_CODES(QJSN_SECOND_TEXT)};
constexpr const char* kOpaqueKindNames[] = {QJSN_OPAQUE_KINDS(QJSN_SECOND_TEXT)};
#undef QJSN_SECOND_TEXT
#define QJSN_NAME_TEXT(name) #name,
constexpr const char* kConsoleLevels[] = {QJSN_CONSOLE_LEVELS(QJSN_NAME_TEXT)};
#undef QJSN_NAME_TEXT

inline const char* errorCodeName(ErrorCode code) { return kErrorCodeNames[static_cast<int>(code)]; }
inline const char* opaqueKindName(OpaqueKind kind) { return kOpaqueKindNames[static_cast<int>(kind)]; }

}  // namespace qjsn
