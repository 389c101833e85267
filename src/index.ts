/**
 * quickjs-native: QuickJS-ng in a native Node-API addon, a hard-limited JavaScript sandbox for
 * running model-written code. See README.md.
 */
export { Sandbox } from "./sandbox.js";
export { SandboxError, isSandboxError } from "./errors.js";
export type { SandboxErrorCode, GuestErrorInfo, TimeoutBudget } from "./errors.js";
export { GuestOpaque } from "./wire.js";
export { renderValue, type RenderOptions } from "./render.js";
export { resultPiecesOf } from "./result-pieces.js";
export type { ArgumentsSchema, SchemaIssue, SchemaResult } from "./host-schema.js";
export { WallHold } from "./wall-hold.js";
export { SANDBOX_DEFAULTS, SANDBOX_LIMITS } from "./options.js";
export { configureProcessPool, PROCESS_POOL_DEFAULTS, type ProcessPoolOptions } from "./process-tier/pool.js";
export type {
  SandboxOptions,
  ResolvedSandboxOptions,
  SandboxClock,
  SandboxIsolation,
  EvalOptions,
  SourceCode,
  EvalReport,
  EvalStats,
  ConsoleEntry,
  ConsoleLevel,
  MemoryUsage,
  HostCallContext,
  HostFunction,
  AsyncHostFunction,
  GuestOpaqueKind,
  NotRestored,
} from "./types.js";
export { inspectSnapshot, snapshotBody, resealSnapshot, SNAPSHOT_FORMAT_VERSION } from "./snapshot.js";
export type {
  SnapshotOptions,
  RestoreOptions,
  RestoredSandbox,
  ResealOptions,
  SnapshotSigning,
  SnapshotInfo,
  SnapshotAfterRun,
} from "./snapshot.js";
export {
  TELEMETRY_CHANNELS,
  TIER,
  keyHash as telemetryKeyHash,
  MAX_TENANT_CHARS,
  nameHostCall,
  traceActive,
  traceOperation,
} from "./telemetry/hub.js";
export type { EvalStartMessage, EvalEndMessage, HostCallStartMessage, HostCallEndMessage } from "./telemetry/hub.js";
export { METRICS as TELEMETRY_METRICS } from "./telemetry/metrics.js";
export type { UsageRecord } from "./telemetry/usage.js";
