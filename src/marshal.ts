/**
 * The host half of the boundary: Node values <-> the wire format that native/wire.h defines.
 * Everything crosses by copy. The encoder (src/encoder.ts), the resumable decoder
 * (src/decoder.ts) and what both share (src/wire.ts) are re-exported here as one module.
 */
export { encodeValue, encodeValueInto, type CopyLimits } from "./encoder.js";
export {
  ConsoleDecoder,
  ValueDecoder,
  decodeScalarArguments,
  decodeConsole,
  decodeValue,
  classNameAtDecode,
  errorHead,
  keysAtDecode,
  sizeAtDecode,
  type KeysAtDecode,
  type ConsoleRecord,
  type ResumableDecode,
} from "./decoder.js";
export type { GuestOpaqueKind } from "./types.js";
export { GuestOpaque } from "./wire.js";
