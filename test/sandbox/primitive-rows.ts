// Rows of host-call tests at the edges of the primitive fast paths, shared by the sync
// (host-primitive-edges.test.ts) and async (async-host-scalar-args.test.ts) suites.

// Guest expressions of primitives at the edges: signed zeros, non-finite and int32-edge numbers,
// strings just under, at and over the 256-unit limit (ASCII, Latin-1, astral and lone surrogates).
export const ARGUMENTS = [
  "-0",
  "0",
  "NaN",
  "Infinity",
  "-Infinity",
  "2 ** 31 - 1",
  "2 ** 31",
  "-(2 ** 31)",
  "-(2 ** 31) - 1",
  "0.1",
  "2 ** 53 + 2",
  "5e-324",
  "true",
  "false",
  "null",
  "undefined",
  "''",
  "'a\\0b'",
  "'\\ud800'",
  "'a\\udc00b'",
  "'\\udbff'.repeat(256)",
  "'\\udbff'.repeat(257)",
  "'\\ud83d\\ude00'",
  "'\\ud83d\\ude00'.repeat(128)",
  "'\\ud83d\\ude00'.repeat(129)",
  "'\\ud83d'.repeat(255) + 'x'",
  "'x'.repeat(255)",
  "'x'.repeat(256)",
  "'x'.repeat(257)",
  "'\\u00e9'.repeat(256)",
  "'\\u00e9'.repeat(257)",
  "'\\u4e2d'.repeat(256)",
];

// Host results at the same edges, and ones the fast path hands to the codec.
export const RESULTS: unknown[] = [
  -0,
  0,
  NaN,
  Infinity,
  -Infinity,
  2 ** 31 - 1,
  2 ** 31,
  -(2 ** 31),
  -(2 ** 31) - 1,
  0.1,
  5e-324,
  true,
  false,
  null,
  undefined,
  "",
  "a\0b",
  "\ud800",
  "a\udc00b",
  "\udbff".repeat(256),
  "\udbff".repeat(257),
  "\ud83d\ude00".repeat(128),
  "\ud83d\ude00".repeat(129),
  "x".repeat(255),
  "x".repeat(256),
  "x".repeat(257),
  "\u00e9".repeat(256),
  "\u00e9".repeat(257),
  12n,
  { a: [1, "b"] },
  [undefined, -0],
];

// What host functions throw, from plain errors to values that are no Error at all.
export const THROWN: Array<() => unknown> = [
  () => new RangeError("nope"),
  () => Object.assign(new Error("renamed"), { name: "CustomError" }),
  () => "a string",
  () => 42,
  () => null,
  () => undefined,
  () => ({ message: "not an Error" }),
  () =>
    new Proxy(
      {},
      {
        get() {
          throw new Error("trap");
        },
      },
    ),
];
