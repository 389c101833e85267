/**
 * The host half of the boundary: Node values <-> the wire format that native/wire.h defines.
 * Everything crosses by copy. The encoder (src/encoder.ts), the resumable decoder
 * (src/decoder.ts), what the decoder records for renderers (src/decoded-facts.ts), the fast path
 * for scalar host-call arguments (src/scalar-arguments.ts) and what the encoder and decoder share
 * (src/wire.ts) are re-exported here as one module.
 */
export { encodeValue, encodeValueInSlices, encodeValueInto, type CopyLimits } from "./encoder.js";
export {
  ConsoleDecoder,
  ValueDecoder,
  decodeConsole,
  decodeValue,
  type ConsoleRecord,
  type ResumableDecode,
} from "./decoder.js";
export { classNameAtDecode, errorHead, keysAtDecode, sizeAtDecode, type KeysAtDecode } from "./decoded-facts.js";
export { NOT_SCALAR, decodeScalarArguments, smallValueOf } from "./scalar-arguments.js";
export type { GuestOpaqueKind } from "./types.js";
export { GuestOpaque } from "./wire.js";
