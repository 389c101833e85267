/**
 * The fast path for the usual host-call arguments (a few scalars): read straight from the wire
 * bytes, with no ValueDecoder behind it and a small fixed bound on the work. It shares no code or
 * state with the resumable decoder (src/decoder.ts), only the wire format (src/wire.ts), so it
 * lives apart from it; anything it does not read it leaves to that decoder.
 */
import { Tag } from "./wire.js";

/** Most arguments, and longest string in bytes (256 UTF-16 units), {@link decodeScalarArguments} reads. */
const SCALAR_ARGUMENTS = 16;
const SCALAR_TEXT_BYTES = 512;

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
    const tag = bytes[pos + 4];
    pos += 5;
    switch (tag) {
      case Tag.Undefined:
        args.push(undefined);
        break;
      case Tag.Null:
        args.push(null);
        break;
      case Tag.False:
        args.push(false);
        break;
      case Tag.True:
        args.push(true);
        break;
      case Tag.Int32:
        if (pos + 4 > end) return undefined;
        args.push(bytes.readInt32LE(pos));
        pos += 4;
        break;
      case Tag.Float64:
        if (pos + 8 > end) return undefined;
        args.push(bytes.readDoubleLE(pos));
        pos += 8;
        break;
      case Tag.Latin1:
      case Tag.String: {
        if (pos + 4 > end) return undefined;
        const latin1 = tag === Tag.Latin1;
        const n = latin1 ? bytes.readUInt32LE(pos) : bytes.readUInt32LE(pos) * 2;
        pos += 4;
        if (n > SCALAR_TEXT_BYTES || pos + n > end) return undefined;
        args.push(bytes.toString(latin1 ? "latin1" : "utf16le", pos, pos + n));
        pos += n;
        break;
      }
      default:
        return undefined;
    }
  }
  return pos === end ? args : undefined;
}
