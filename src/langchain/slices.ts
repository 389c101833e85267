/**
 * Host work on guest-sized or stored bytes (digests, chunking, deflating of snapshots and
 * journals) done a slice per turn of the event loop: the Node main thread serves every session,
 * so no such step may hold it for longer than one slice, whatever the size of the data.
 */
import { createHash, type Hash, type Hmac } from "node:crypto";

/** Bytes hashed or scanned between two turns of the event loop: about a millisecond of work here. */
export const DIGEST_SLICE_BYTES = 512 * 1024;

/** Lets the event loop turn (timers, I/O, other sessions) before the caller goes on. */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Counts bytes of work done on the main thread and lets the event loop turn once a slice's worth
 * is done. Work under one slice in all costs no turn.
 */
export class Slicer {
  readonly #sliceBytes: number;
  #done = 0;

  constructor(sliceBytes: number = DIGEST_SLICE_BYTES) {
    this.#sliceBytes = sliceBytes;
  }

  /** Records `bytes` of work done; resolves after a turn of the event loop when that fills a slice. */
  async spent(bytes: number): Promise<void> {
    this.#done += bytes;
    if (this.#done < this.#sliceBytes) return;
    this.#done = 0;
    await yieldToLoop();
  }
}

/** Feeds `bytes` to `hash` a slice at a time, with `slicer` deciding when the event loop turns. */
export async function updateInSlices(hash: Hash | Hmac, bytes: Uint8Array, slicer: Slicer): Promise<void> {
  for (let at = 0; at < bytes.length; at += DIGEST_SLICE_BYTES) {
    const slice = bytes.subarray(at, at + DIGEST_SLICE_BYTES);
    hash.update(slice);
    await slicer.spent(slice.length);
  }
}

/** SHA-256 of `bytes`, hex, computed a slice per turn of the event loop. */
export async function sha256HexInSlices(bytes: Uint8Array): Promise<string> {
  const hash = createHash("sha256");
  await updateInSlices(hash, bytes, new Slicer());
  return hash.digest("hex");
}
