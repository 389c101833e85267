/**
 * Frames of the channel to a helper process, as the parent writes and reads them (the helper's
 * side: native/helper/frames.h; the frames and their fields: native/boundary.h QJSN_CHANNEL_FRAMES).
 * The helper is hostile: every read is bounds-checked, and a frame that does not parse throws
 * {@link ProtocolError}, upon which the helper is killed and reported lost.
 */
import { CHANNEL_SIZES } from "../native.js";

const HEADER = CHANNEL_SIZES.headerBytes;
const textDecoder = new TextDecoder("utf-8", { fatal: false });

/** A frame from a helper that does not parse. */
export class ProtocolError extends Error {}

/** Builds one frame: header, then little-endian fields. */
export class FrameWriter {
  #buf: Buffer;
  #at = HEADER;

  constructor(frame: number, sandboxId: number, sizeHint = 64) {
    this.#buf = Buffer.allocUnsafe(HEADER + sizeHint);
    this.#buf.fill(0, 0, HEADER);
    this.#buf[4] = frame;
    this.#buf.writeUInt32LE(sandboxId, 8);
  }

  #room(n: number): void {
    if (this.#at + n <= this.#buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.#buf.length * 2, this.#at + n));
    this.#buf.copy(next, 0, 0, this.#at);
    this.#buf = next;
  }

  u8(v: number): this {
    this.#room(1);
    this.#buf[this.#at++] = v;
    return this;
  }

  u32(v: number): this {
    this.#room(4);
    this.#buf.writeUInt32LE(v >>> 0, this.#at);
    this.#at += 4;
    return this;
  }

  f64(v: number): this {
    this.#room(8);
    this.#buf.writeDoubleLE(v, this.#at);
    this.#at += 8;
    return this;
  }

  bytes(v: Uint8Array): this {
    this.u32(v.length);
    this.#room(v.length);
    this.#buf.set(v, this.#at);
    this.#at += v.length;
    return this;
  }

  string(s: string): this {
    const n = Buffer.byteLength(s);
    this.u32(n);
    this.#room(n);
    this.#buf.write(s, this.#at, "utf8");
    this.#at += n;
    return this;
  }

  /** The frame, its body length filled in. */
  done(): Buffer {
    this.#buf.writeUInt32LE(this.#at - HEADER, 0);
    return this.#buf.subarray(0, this.#at);
  }
}

/** Reads one frame from a helper. Every field read past the end throws {@link ProtocolError}. */
export class FrameReader {
  readonly frame: number;
  readonly direct: boolean;
  readonly sandboxId: number;
  readonly #buf: Buffer;
  #at = HEADER;

  constructor(buf: Buffer) {
    if (buf.length < HEADER || buf.readUInt32LE(0) !== buf.length - HEADER) throw new ProtocolError("bad frame length");
    this.#buf = buf;
    this.frame = buf[4]!;
    this.direct = (buf[5]! & CHANNEL_SIZES.directFlag) !== 0;
    this.sandboxId = buf.readUInt32LE(8);
  }

  #take(n: number): number {
    const at = this.#at;
    if (n > this.#buf.length - at) throw new ProtocolError("frame field past the end of its frame");
    this.#at = at + n;
    return at;
  }

  u8(): number {
    return this.#buf[this.#take(1)]!;
  }

  u32(): number {
    return this.#buf.readUInt32LE(this.#take(4));
  }

  f64(): number {
    return this.#buf.readDoubleLE(this.#take(8));
  }

  /** A view of the frame's bytes (the frame is the caller's own copy). */
  bytes(): Buffer {
    const n = this.u32();
    const at = this.#take(n);
    return this.#buf.subarray(at, at + n);
  }

  string(): string {
    const bytes = this.bytes();
    return textDecoder.decode(bytes);
  }
}
