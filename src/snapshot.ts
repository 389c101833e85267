/**
 * The envelope around a sandbox snapshot: a fixed header, the body native/snapshot_writer.cc writes (every
 * user-defined global as data plus function source text, never engine bytecode), and a digest.
 * Every length is checked and the digest verified before a byte of the body is parsed.
 *
 * ```
 * offset size
 *      0    8  magic "QJSNSNAP"
 *      8    2  format version (u16 LE): 2 (BigInts as hex); 1 (BigInts as decimal) is still read
 *     10    2  flags (u16 LE): bit 0 = signed, bit 1 = body deflated (raw DEFLATE)
 *     12    4  body length as stored (u32 LE)
 *     16    8  turn (u64 LE): the turn counter a signed snapshot is bound to, 0 when unsigned
 *     24    8  engine version that wrote it, ASCII, NUL-padded (informational: the body format
 *              does not depend on it)
 *     32    n  body
 *   32+n   32  HMAC-SHA256 (signed) or SHA-256 (unsigned) of everything before it
 * ```
 * The HMAC also covers the thread id, which is not stored: a snapshot taken on another thread
 * or at another turn fails verification. A deflated body is inflated only after the digest
 * matched, and never beyond `maxSnapshotBytes`.
 */
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from "node:crypto";
import { promisify } from "node:util";
import { constants as zlibConstants, deflateRaw, deflateRawSync, inflateRaw, inflateRawSync } from "node:zlib";
import { SandboxError } from "./errors.js";
import {
  JobKind,
  NativeSnapshotStatus,
  snapshotResultOf,
  type NativeHandle,
  type NativeSnapshotRead,
  type NativeSnapshotWrite,
} from "./native.js";
import { refusal } from "./outcomes.js";
import { requestSnapshot } from "./request.js";
import type { EvalReport, NotRestored, SandboxOptions } from "./types.js";
import type { Sandbox } from "./sandbox.js";

const MAGIC = Buffer.from("QJSNSNAP", "latin1");
/** Version of the snapshot layout this build writes. It also reads version 1. */
export const SNAPSHOT_FORMAT_VERSION = 2;
// Version 1 differs only in writing BigInts as decimal text, which the reader still accepts (up to
// 20,000 digits: decimal conversion is quadratic).
const READABLE_FORMAT_VERSIONS: readonly number[] = [1, 2];
const HEADER_BYTES = 32;
const DIGEST_BYTES = 32;
/** @internal Bytes a snapshot adds around its body. */
export const SNAPSHOT_OVERHEAD_BYTES = HEADER_BYTES + DIGEST_BYTES;
const FLAG_SIGNED = 1;
const FLAG_DEFLATED = 2;
const KNOWN_FLAGS = FLAG_SIGNED | FLAG_DEFLATED;
const MAX_BODY_BYTES = 0xffff_ffff;
const MIN_KEY_BYTES = 16;
const HMAC_DOMAIN = Buffer.from("quickjs-native snapshot\0", "latin1");

/** Binds a snapshot to a key, a conversation thread and a turn. */
export interface SnapshotSigning {
  /** HMAC-SHA256 key, at least 16 bytes. */
  key: string | Uint8Array;
  /** The thread the snapshot belongs to; another thread's snapshot is refused. */
  threadId: string;
  /** Turn counter (a non-negative safe integer); restoring expects exactly this turn. */
  turn: number;
}

/** Options of {@link Sandbox.snapshot}. */
export interface SnapshotOptions {
  /** Largest snapshot accepted, in bytes, envelope included. Default: the sandbox's `memoryLimitBytes`. */
  maxSnapshotBytes?: number;
  /** Sign the snapshot (HMAC-SHA256). Unsigned snapshots carry a SHA-256 digest against corruption. */
  signing?: SnapshotSigning;
  /**
   * Deflate the body (snapshot only; restore reads either). Records of one shape compress several
   * times over, at a few ms per MB. Default false.
   */
  compress?: boolean;
}

/** Options of {@link Sandbox.restore}: the new sandbox's options plus the snapshot's. */
export interface RestoreOptions extends SandboxOptions, Omit<SnapshotOptions, "compress"> {
  /** Execution budget for re-creating functions and classes from their source, ms. Default: `executionTimeoutMs`. */
  restoreTimeoutMs?: number;
}

/** What {@link Sandbox.restore} returns. */
export interface RestoredSandbox {
  sandbox: Sandbox;
  /**
   * The placeholders this snapshot introduced; each throws `Value for 'NAME' was not restored...`
   * when read. A placeholder carried over from an earlier restore (the snapshot was taken of a
   * restored sandbox) keeps its original type but is not listed again: it was reported then.
   */
  notRestored: NotRestored[];
}

/** Header fields of a snapshot, read after its lengths are checked (the digest is not verified). */
export interface SnapshotInfo {
  formatVersion: number;
  signed: boolean;
  /** The body is stored deflated. */
  compressed: boolean;
  turn: number;
  engineVersion: string;
  bodyBytes: number;
}

const SNAPSHOT_OPTION_KEYS = ["maxSnapshotBytes", "signing", "compress"] as const;
const RESTORE_OPTION_KEYS = ["maxSnapshotBytes", "signing", "restoreTimeoutMs"] as const;

function invalidArgument(message: string): SandboxError {
  return new SandboxError("INVALID_ARGUMENT", message);
}

function invalidSnapshot(message: string): SandboxError {
  return new SandboxError("INVALID_SNAPSHOT", message);
}

interface ResolvedSnapshotOptions {
  maxSnapshotBytes: number;
  signing?: { key: Buffer; threadId: string; turn: number };
  compress?: boolean;
}

function resolveSigning(signing: unknown): ResolvedSnapshotOptions["signing"] {
  if (signing === undefined) return undefined;
  if (typeof signing !== "object" || signing === null)
    throw invalidArgument("signing must be an object { key, threadId, turn }");
  const { key, threadId, turn } = signing as SnapshotSigning;
  let keyBytes: Buffer;
  if (typeof key === "string") keyBytes = Buffer.from(key, "utf8");
  else if (key instanceof Uint8Array) keyBytes = Buffer.from(key);
  else throw invalidArgument("signing.key must be a string or a Uint8Array");
  if (keyBytes.length < MIN_KEY_BYTES) throw invalidArgument(`signing.key must be at least ${MIN_KEY_BYTES} bytes`);
  if (typeof threadId !== "string" || threadId.length > 4096)
    throw invalidArgument("signing.threadId must be a string of at most 4096 characters");
  if (typeof turn !== "number" || !Number.isSafeInteger(turn) || turn < 0)
    throw invalidArgument("signing.turn must be a non-negative safe integer");
  return { key: keyBytes, threadId, turn };
}

function resolveOptions(options: Partial<SnapshotOptions>, defaultMaxBytes: number): ResolvedSnapshotOptions {
  const max = options.maxSnapshotBytes ?? defaultMaxBytes;
  if (typeof max !== "number" || !Number.isInteger(max) || max < SNAPSHOT_OVERHEAD_BYTES + 4 || max > MAX_BODY_BYTES) {
    throw invalidArgument(
      `maxSnapshotBytes must be an integer between ${SNAPSHOT_OVERHEAD_BYTES + 4} and ${MAX_BODY_BYTES}`,
    );
  }
  const out: ResolvedSnapshotOptions = { maxSnapshotBytes: max };
  const signing = resolveSigning(options.signing);
  if (signing) out.signing = signing;
  if (options.compress !== undefined) {
    if (typeof options.compress !== "boolean") throw invalidArgument("compress must be a boolean");
    out.compress = options.compress;
  }
  return out;
}

/** @internal Validates the options of `sandbox.snapshot()`. */
export function resolveSnapshotOptions(options: unknown, defaultMaxBytes: number): ResolvedSnapshotOptions {
  if (options === undefined) return { maxSnapshotBytes: defaultMaxBytes };
  if (typeof options !== "object" || options === null) throw invalidArgument("snapshot options must be an object");
  for (const key of Object.keys(options)) {
    if (!(SNAPSHOT_OPTION_KEYS as readonly string[]).includes(key))
      throw invalidArgument(`unknown snapshot option '${key}'; known options: ${SNAPSHOT_OPTION_KEYS.join(", ")}`);
  }
  return resolveOptions(options as SnapshotOptions, defaultMaxBytes);
}

/** @internal Splits `Sandbox.restore` options into the sandbox's and the snapshot's. */
export function splitRestoreOptions(options: unknown): {
  sandbox: SandboxOptions | undefined;
  snapshot: Partial<SnapshotOptions>;
  restoreTimeoutMs?: number;
} {
  if (options === undefined) return { sandbox: undefined, snapshot: {} };
  if (typeof options !== "object" || options === null) throw invalidArgument("restore options must be an object");
  const sandbox: Record<string, unknown> = {};
  const snapshot: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if ((RESTORE_OPTION_KEYS as readonly string[]).includes(key)) snapshot[key] = value;
    else sandbox[key] = value;
  }
  const { restoreTimeoutMs, ...rest } = snapshot;
  if (
    restoreTimeoutMs !== undefined &&
    (typeof restoreTimeoutMs !== "number" || !(restoreTimeoutMs > 0) || restoreTimeoutMs > 2 ** 31 - 1)
  ) {
    throw invalidArgument("restoreTimeoutMs must be a number of milliseconds between 0 (exclusive) and 2147483647");
  }
  const out: { sandbox: SandboxOptions; snapshot: Partial<SnapshotOptions>; restoreTimeoutMs?: number } = {
    sandbox: sandbox as SandboxOptions,
    snapshot: rest as Partial<SnapshotOptions>,
  };
  if (restoreTimeoutMs !== undefined) out.restoreTimeoutMs = restoreTimeoutMs;
  return out;
}

// The hash or HMAC a snapshot's digest is computed with, fed with what precedes the covered bytes.
function hasher(signing: ResolvedSnapshotOptions["signing"]): Hash | Hmac {
  if (!signing) return createHash("sha256");
  const thread = Buffer.from(signing.threadId, "utf8");
  const threadLength = Buffer.alloc(4);
  threadLength.writeUInt32LE(thread.length);
  return createHmac("sha256", signing.key).update(HMAC_DOMAIN).update(threadLength).update(thread);
}

function digest(signing: ResolvedSnapshotOptions["signing"], covered: Uint8Array): Buffer {
  return hasher(signing).update(covered).digest();
}

/** Bytes hashed per turn of the event loop by {@link digestInSlices} (about 2 ms here). */
const DIGEST_SLICE_BYTES = 512 * 1024;

// digest() a slice at a time, with a turn of the event loop between slices: SHA-256 of a 5 MB
// snapshot is ~17 ms of the main thread in one go on this machine. `fill(from, to)`, when given,
// writes `covered[from, to)` just before that slice is hashed.
async function digestInSlices(
  signing: ResolvedSnapshotOptions["signing"],
  covered: Uint8Array,
  fill?: (from: number, to: number) => void,
): Promise<Buffer> {
  const hash = hasher(signing);
  for (let at = 0; at < covered.length; at += DIGEST_SLICE_BYTES) {
    if (at > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    const to = Math.min(covered.length, at + DIGEST_SLICE_BYTES);
    fill?.(at, to);
    hash.update(covered.subarray(at, to));
  }
  return hash.digest();
}

function nativeFailure(status: number, message: string): SandboxError {
  switch (status) {
    case NativeSnapshotStatus.TooLarge:
      return invalidSnapshot(message);
    case NativeSnapshotStatus.OutOfMemory:
      return new SandboxError("OUT_OF_MEMORY", message);
    case NativeSnapshotStatus.Interrupted:
      return new SandboxError("TIMEOUT", message, { budget: "execution" });
    case NativeSnapshotStatus.StackExhausted:
      return new SandboxError("STACK_OVERFLOW", message);
    default:
      return invalidSnapshot(message);
  }
}

function notRestoredList(flat: string[]): NotRestored[] {
  const out: NotRestored[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push({ name: flat[i]!, type: flat[i + 1]! });
  return out;
}

/**
 * @internal
 * Writes a snapshot of `handle`'s globals, except `excludedNames` (the host's own functions).
 * Throws `INVALID_SNAPSHOT` when it would exceed `maxSnapshotBytes`, `BUSY` while an eval runs.
 */
export function takeSnapshot(
  handle: NativeHandle,
  excludedNames: string[],
  options: ResolvedSnapshotOptions,
  engineVersion: string,
): Uint8Array {
  requestSnapshot(JobKind.WriteSnapshot, 0, 0, maxSnapshotBody(options));
  const raw = handle.writeSnapshot(excludedNames);
  if (!Array.isArray(raw)) throw refusal(raw, "take a snapshot", "cannot take a snapshot");
  const body = writtenBody(snapshotResultOf(raw), options);
  return sealed(options.compress ? deflateRawSync(body, DEFLATE_OPTIONS) : body, options, engineVersion);
}

/**
 * @internal
 * Like {@link takeSnapshot} for a body written on an executor thread (`written` is the write's
 * result). A plain body of one digest slice or less is sealed at once, as `takeSnapshot` seals it
 * (the last good state kept after every eval usually is that small); a larger one is digested a
 * slice per turn of the event loop, and deflated on the libuv pool.
 */
export function sealWrittenSnapshot(
  written: NativeSnapshotWrite,
  options: ResolvedSnapshotOptions,
  engineVersion: string,
): Uint8Array | Promise<Uint8Array> {
  const plain = writtenBody(written, options);
  if (options.compress !== true && HEADER_BYTES + plain.length <= DIGEST_SLICE_BYTES)
    return sealed(plain, options, engineVersion);
  return sealInSlices(plain, options, engineVersion);
}

async function sealInSlices(
  plain: Buffer,
  options: ResolvedSnapshotOptions,
  engineVersion: string,
): Promise<Uint8Array> {
  return sealBodyInSlices(
    options.compress ? await deflateRawAsync(plain, DEFLATE_OPTIONS) : plain,
    options,
    engineVersion,
  );
}

// sealed(), the body copied in and digested a slice per turn of the event loop.
async function sealBodyInSlices(
  body: Buffer,
  options: ResolvedSnapshotOptions,
  engineVersion: string,
  formatVersion = SNAPSHOT_FORMAT_VERSION,
): Promise<Uint8Array> {
  const { out, covered } = framed(body, options, engineVersion, formatVersion, false);
  // The body is copied into place a slice at a time, as it is digested: copying a 200,000-row
  // state in one go held the event loop for 30-40 ms on a loaded machine.
  const fill = (from: number, to: number): void => {
    const start = Math.max(from, HEADER_BYTES);
    if (to > start) body.copy(out, start, start - HEADER_BYTES, to - HEADER_BYTES);
  };
  (await digestInSlices(options.signing, covered, fill)).copy(out, covered.length);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

const DEFLATE_OPTIONS = { level: zlibConstants.Z_BEST_SPEED };
const deflateRawAsync = promisify(deflateRaw);
const inflateRawAsync = promisify(inflateRaw);

/** What {@link Sandbox.runThenSnapshot} resolves with. */
export interface SnapshotAfterRun {
  /** The eval's report, as {@link Sandbox.run} gives it. */
  report: EvalReport;
  /** The state the eval left, sealed as {@link Sandbox.snapshotAsync} seals it. */
  snapshot?: Uint8Array;
  /** Why no snapshot could be taken of an eval that was not stopped. */
  snapshotError?: SandboxError;
}

/** @internal A snapshot asked for after an eval: its options, and the write's result once the eval's job ended. */
export interface SnapshotAfterEval {
  options: ResolvedSnapshotOptions;
  written?: NativeSnapshotWrite;
}

/** @internal The byte cap passed to the native writer: it applies to the plain body. */
export function maxSnapshotBody(options: ResolvedSnapshotOptions): number {
  return options.maxSnapshotBytes - SNAPSHOT_OVERHEAD_BYTES;
}

function writtenBody(written: NativeSnapshotWrite, options: ResolvedSnapshotOptions): Buffer {
  const { status, body } = written;
  if (status !== NativeSnapshotStatus.Ok || body === undefined) {
    const message = written.message ?? "the snapshot could not be written";
    throw nativeFailure(
      status,
      status === NativeSnapshotStatus.TooLarge
        ? `the snapshot cannot be written (maxSnapshotBytes (${options.maxSnapshotBytes}), nesting and value caps): ${message}`
        : message,
    );
  }
  return body;
}

// The native cap applies to the plain body, so a snapshot inflates within the same cap it was written under.
function sealed(
  body: Buffer,
  options: ResolvedSnapshotOptions,
  engineVersion: string,
  formatVersion = SNAPSHOT_FORMAT_VERSION,
): Uint8Array {
  const { out, covered } = framed(body, options, engineVersion, formatVersion);
  digest(options.signing, covered).copy(out, covered.length);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

// A snapshot's bytes but for its digest: header and body (`covered`, the body left for the caller
// to copy in without `copyBody`), then room for the digest.
function framed(
  body: Buffer,
  options: ResolvedSnapshotOptions,
  engineVersion: string,
  formatVersion = SNAPSHOT_FORMAT_VERSION,
  copyBody = true,
): { out: Buffer; covered: Buffer } {
  if (body.length + SNAPSHOT_OVERHEAD_BYTES > options.maxSnapshotBytes)
    throw invalidSnapshot(`the snapshot cannot be written within maxSnapshotBytes (${options.maxSnapshotBytes})`);
  const out = Buffer.allocUnsafe(HEADER_BYTES + body.length + DIGEST_BYTES);
  out.fill(0, 0, HEADER_BYTES);
  MAGIC.copy(out, 0);
  out.writeUInt16LE(formatVersion, 8);
  out.writeUInt16LE((options.signing ? FLAG_SIGNED : 0) | (options.compress ? FLAG_DEFLATED : 0), 10);
  out.writeUInt32LE(body.length, 12);
  out.writeBigUInt64LE(BigInt(options.signing?.turn ?? 0), 16);
  out.write(engineVersion.slice(0, 8), 24, 8, "latin1");
  if (copyBody) body.copy(out, HEADER_BYTES);
  return { out, covered: out.subarray(0, HEADER_BYTES + body.length) };
}

/** Reads a snapshot's header after checking its lengths. Does not verify the digest. */
export function inspectSnapshot(bytes: unknown): SnapshotInfo {
  if (!(bytes instanceof Uint8Array)) throw invalidSnapshot("a snapshot must be a Uint8Array");
  if (bytes.length < SNAPSHOT_OVERHEAD_BYTES + 4)
    throw invalidSnapshot(`the snapshot is truncated (${bytes.length} bytes)`);
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  if (!b.subarray(0, 8).equals(MAGIC)) throw invalidSnapshot("not a quickjs-native snapshot (bad magic)");
  const formatVersion = b.readUInt16LE(8);
  if (!READABLE_FORMAT_VERSIONS.includes(formatVersion))
    throw invalidSnapshot(
      `snapshot format version ${formatVersion} is not supported (this build reads versions ${READABLE_FORMAT_VERSIONS.join(", ")})`,
    );
  const flags = b.readUInt16LE(10);
  if ((flags & ~KNOWN_FLAGS) !== 0) throw invalidSnapshot(`unknown snapshot flags 0x${flags.toString(16)}`);
  const bodyBytes = b.readUInt32LE(12);
  if (bodyBytes !== b.length - SNAPSHOT_OVERHEAD_BYTES)
    throw invalidSnapshot(
      `the snapshot is truncated or padded: its header says ${bodyBytes + SNAPSHOT_OVERHEAD_BYTES} bytes, it has ${b.length}`,
    );
  const turn = b.readBigUInt64LE(16);
  if (turn > BigInt(Number.MAX_SAFE_INTEGER)) throw invalidSnapshot("the snapshot's turn counter is out of range");
  const engineVersion = b.toString("latin1", 24, 32).replace(/\0+$/, "");
  if (!/^[\x20-\x7e]*$/.test(engineVersion)) throw invalidSnapshot("the snapshot's engine version is not text");
  return {
    formatVersion,
    signed: (flags & FLAG_SIGNED) !== 0,
    compressed: (flags & FLAG_DEFLATED) !== 0,
    turn: Number(turn),
    engineVersion,
    bodyBytes,
  };
}

/**
 * @internal
 * Checks size, header and digest (or signature), then returns the body. Throws `INVALID_SNAPSHOT`
 * for anything truncated, altered, oversized, unsigned when a key is given, or signed for another
 * thread or turn.
 */
export function openSnapshot(bytes: unknown, options: ResolvedSnapshotOptions): Buffer {
  const { info, body } = verifiedBody(bytes, options);
  if (!info.compressed) return body;
  try {
    return inflateRawSync(body, { maxOutputLength: options.maxSnapshotBytes });
  } catch (err) {
    throw new SandboxError(
      "INVALID_SNAPSHOT",
      `the snapshot's body does not inflate within maxSnapshotBytes (${options.maxSnapshotBytes})`,
      { cause: err },
    );
  }
}

/** Checks size, header and digest (or signature) like {@link openSnapshot}; returns the body as stored (deflated or not), a view of `bytes`. */
function verifiedBody(bytes: unknown, options: ResolvedSnapshotOptions): { info: SnapshotInfo; body: Buffer } {
  const { info, covered, stored } = envelopeOf(bytes, options);
  return bodyIfMatches(info, covered, stored, digest(options.signing, covered), options);
}

/** {@link verifiedBody}, the digest computed a slice per turn of the event loop. */
async function verifiedBodyInSlices(
  bytes: unknown,
  options: ResolvedSnapshotOptions,
): Promise<{ info: SnapshotInfo; body: Buffer }> {
  const { info, covered, stored } = envelopeOf(bytes, options);
  return bodyIfMatches(info, covered, stored, await digestInSlices(options.signing, covered), options);
}

// The checks of verifiedBody before the digest: the header and what the digest covers, and the stored digest.
function envelopeOf(
  bytes: unknown,
  options: ResolvedSnapshotOptions,
): { info: SnapshotInfo; covered: Buffer; stored: Buffer } {
  if (bytes instanceof Uint8Array && bytes.length > options.maxSnapshotBytes) {
    throw invalidSnapshot(`the snapshot is ${bytes.length} bytes, over maxSnapshotBytes (${options.maxSnapshotBytes})`);
  }
  const info = inspectSnapshot(bytes);
  const b = Buffer.from((bytes as Uint8Array).buffer, (bytes as Uint8Array).byteOffset, (bytes as Uint8Array).length);
  if (options.signing && !info.signed)
    throw invalidSnapshot("the snapshot is not signed, and a signing key is configured");
  if (!options.signing && info.signed)
    throw invalidSnapshot("the snapshot is signed; pass its signing key, thread id and turn to restore it");
  if (options.signing && info.turn !== options.signing.turn) {
    throw invalidSnapshot(`the snapshot is from turn ${info.turn}, expected turn ${options.signing.turn}`);
  }
  const end = HEADER_BYTES + info.bodyBytes;
  return { info, covered: b.subarray(0, end), stored: b.subarray(end) };
}

function bodyIfMatches(
  info: SnapshotInfo,
  covered: Buffer,
  stored: Buffer,
  expected: Buffer,
  options: ResolvedSnapshotOptions,
): { info: SnapshotInfo; body: Buffer } {
  if (!timingSafeEqual(expected, stored)) {
    throw invalidSnapshot(
      options.signing
        ? "the snapshot's signature does not match (altered, or from another thread or key)"
        : "the snapshot's checksum does not match (corrupted)",
    );
  }
  return { info, body: covered.subarray(HEADER_BYTES) };
}

/**
 * The body of a snapshot as stored (deflated when it was written with `compress`), without the
 * header (which carries the turn) and the digest or signature: two snapshots of the same
 * interpreter state, written with the same `compress`, have equal bodies whatever their turn,
 * thread or key. A view of `bytes`, not a copy. Checks the lengths, not the digest.
 */
export function snapshotBody(bytes: Uint8Array): Uint8Array {
  const info = inspectSnapshot(bytes);
  return bytes.subarray(HEADER_BYTES, HEADER_BYTES + info.bodyBytes);
}

/** Options of {@link resealSnapshot}. */
export interface ResealOptions extends SnapshotOptions {
  /** Largest snapshot accepted and written, in bytes, envelope included; it also caps inflating. */
  maxSnapshotBytes: number;
  /** The signing the given snapshot carries, to verify it; omit for an unsigned snapshot. */
  from?: SnapshotSigning;
}

/**
 * The same interpreter state as snapshot `bytes`, sealed again for `signing` (another thread,
 * turn or key, or unsigned without it) and `compress`: a new turn's snapshot of a state already
 * snapshotted, without walking the sandbox again. `bytes` is verified first (its digest, or its
 * signature with `from`), so a snapshot is never signed anew unless it was intact. Deflating or
 * inflating a body runs on the libuv pool. Throws `INVALID_SNAPSHOT` like {@link Sandbox.restore}
 * for a snapshot that does not verify or does not fit in `maxSnapshotBytes`.
 */
export async function resealSnapshot(bytes: Uint8Array, options: ResealOptions): Promise<Uint8Array> {
  if (typeof options !== "object" || options === null) throw invalidArgument("reseal options must be an object");
  const { from, ...target } = options;
  const resolved = resolveSnapshotOptions(target, MAX_BODY_BYTES);
  // Verified and sealed a slice per turn of the event loop: a thread's state is resealed after every run.
  const { info, body } = await verifiedBodyInSlices(bytes, {
    maxSnapshotBytes: resolved.maxSnapshotBytes,
    ...(from === undefined ? {} : { signing: resolveSigning(from) }),
  });
  const compress = resolved.compress ?? false;
  let out = body;
  if (compress && !info.compressed) out = await deflateRawAsync(body, DEFLATE_OPTIONS);
  if (!compress && info.compressed) {
    try {
      out = await inflateRawAsync(body, { maxOutputLength: resolved.maxSnapshotBytes });
    } catch (err) {
      throw new SandboxError(
        "INVALID_SNAPSHOT",
        `the snapshot's body does not inflate within maxSnapshotBytes (${resolved.maxSnapshotBytes})`,
        { cause: err },
      );
    }
  }
  return sealBodyInSlices(out, { ...resolved, compress }, info.engineVersion, info.formatVersion);
}

/** @internal Defines a verified body's globals in a fresh sandbox's handle and lists what came back as placeholders. */
export function restoreBody(handle: NativeHandle, body: Buffer, budgetMs: number): NotRestored[] {
  requestSnapshot(JobKind.ReadSnapshot, 0, budgetMs, 0);
  const raw = handle.readSnapshot(body);
  if (!Array.isArray(raw)) throw refusal(raw, "restore into a sandbox", "cannot restore");
  return restoredList(snapshotResultOf(raw));
}

/**
 * @internal
 * What a native snapshot read (inline or on an executor thread) could not restore; throws for a
 * failed read.
 */
export function restoredList(read: NativeSnapshotRead): NotRestored[] {
  const { status, message, notRestored } = read;
  if (status !== NativeSnapshotStatus.Ok)
    throw nativeFailure(
      status,
      message !== undefined ? `the snapshot could not be restored: ${message}` : "the snapshot could not be restored",
    );
  return notRestoredList(notRestored);
}
