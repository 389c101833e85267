/**
 * The fast path for the usual host-call arguments (a few scalars) and eval results (one scalar):
 * read straight from the wire bytes, with no ValueDecoder behind it and a small fixed bound on the work. It shares no code or
 * state with the resumable decoder (src/decoder.ts), only the wire format (src/wire.ts), so it
 * lives apart from it; anything it does not read it leaves to that decoder.
 */
import { Tag } from "./wire.js";

/** Most arguments, and longest string in bytes (256 UTF-16 units), {@link decodeScalarArguments} reads. */
const SCALAR_ARGUMENTS = 16;
const SCALAR_TEXT_BYTES = 512;

/** What {@link smallValueOf} answers for bytes that are not one scalar. */
export const NOT_SCALAR: unique symbol = Symbol("not a scalar");

let scalarEnd = 0; // where the value readScalar last read ends

// The scalar whose tag is at bytes[pos], within bytes[0, end): undefined, null, a boolean, a
// number, a string of at most SCALAR_TEXT_BYTES bytes. Its end goes to scalarEnd; anything else
// (or bytes short of its end) answers NOT_SCALAR.
function readScalar(bytes: Buffer, pos: number, end: number): unknown {
  if (pos >= end) return NOT_SCALAR;
  const tag = bytes[pos++];
  scalarEnd = pos;
  switch (tag) {
    case Tag.Undefined:
      return undefined;
    case Tag.Null:
      return null;
    case Tag.False:
      return false;
    case Tag.True:
      return true;
    case Tag.Int32:
      if (pos + 4 > end) return NOT_SCALAR;
      scalarEnd = pos + 4;
      return bytes.readInt32LE(pos);
    case Tag.Float64:
      if (pos + 8 > end) return NOT_SCALAR;
      scalarEnd = pos + 8;
      return bytes.readDoubleLE(pos);
    case Tag.Latin1:
    case Tag.String: {
      if (pos + 4 > end) return NOT_SCALAR;
      const latin1 = tag === Tag.Latin1;
      const n = latin1 ? bytes.readUInt32LE(pos) : bytes.readUInt32LE(pos) * 2;
      pos += 4;
      if (n > SCALAR_TEXT_BYTES || pos + n > end) return NOT_SCALAR;
      scalarEnd = pos + n;
      return bytes.toString(latin1 ? "latin1" : "utf16le", pos, pos + n);
    }
    default:
      return NOT_SCALAR;
  }
}

/**
 * The value `bytes` hold when it is one scalar (as {@link decodeScalarArguments} reads them) and
 * nothing else: the result of most evals, decoded without a ValueDecoder. Else {@link NOT_SCALAR},
 * and the caller decodes with a ValueDecoder (which names what is malformed).
 */
export function smallValueOf(bytes: Buffer): unknown {
  const value = readScalar(bytes, 0, bytes.length);
  return value !== NOT_SCALAR && scalarEnd === bytes.length ? value : NOT_SCALAR;
}

/**
 * The usual host-call arguments, decoded without a ValueDecoder: `bytes[0, end)` holds an
 * argument array whose elements are all scalars (undefined, null, booleans, numbers, strings of
 * up to 256 units), at most 16 of them. The values are the ones a ValueDecoder gives for the same
 * bytes; anything else (an object, a longer string, more arguments, unusual or malformed bytes)
 * answers undefined, and the caller decodes with a ValueDecoder (in slices, and reporting what is
 * malformed). So the work here is small and bounded whatever the guest sends.
 */
export function decodeScalarArguments(bytes: Buffer, end: number): unknown[] | undefined {
  if (end < 9 || bytes[0] !== Tag.Array) return undefined;
  const length = bytes.readUInt32LE(1);
  if (length > SCALAR_ARGUMENTS || bytes.readUInt32LE(5) !== length) return undefined; // holes: the general decoder keeps them
  const args: unknown[] = [];
  let pos = 9;
  for (let i = 0; i < length; i++) {
    if (pos + 5 > end || bytes.readUInt32LE(pos) !== i) return undefined;
    const value = readScalar(bytes, pos + 4, end);
    if (value === NOT_SCALAR) return undefined;
    args.push(value);
    pos = scalarEnd;
  }
  return pos === end ? args : undefined;
}
