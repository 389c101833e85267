// Writes the seed corpora of the fuzz targets. Run after `npm run build`; commit the output.
// - marshal: one file per value class, encoded by the host-side encoder (src/marshal.ts) so seeds
//   are exactly what the host sends, plus hand-made corners of the format.
// - snapshot: bodies of real snapshots (the envelope's header and digest stripped), one per kind
//   of global a guest leaves behind.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Sandbox } from "../dist/index.js";
import { encodeValue } from "../dist/marshal.js";

const corpus = join(dirname(fileURLToPath(import.meta.url)), "corpus");
function freshDir(name) {
  const dir = join(corpus, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}
const dir = freshDir("marshal");

const cyclic = { name: "root", children: [] };
cyclic.children.push({ parent: cyclic });
const shared = new ArrayBuffer(16);
const holes = [1, , 3];
holes[10] = "x";
const nullProto = Object.assign(Object.create(null), { a: 1, __proto__x: 2 });
Object.defineProperty(nullProto, "__proto__", { value: { inner: true }, enumerable: true });
const typeErr = new TypeError("bad thing");
const custom = new Error("custom");
custom.name = "CustomError";
// Short, machine-independent stacks (a real one would carry this checkout's paths).
typeErr.stack = "TypeError: bad thing\n    at seed (corpus.js:1:1)";
custom.stack = undefined;

const values = {
  primitives: [undefined, null, true, false, 0, -0, 1.5, NaN, Infinity, -Infinity, 2 ** 31, -(2 ** 31)],
  strings: ["", "ascii", "latin1 \u00e9\u00ff", "utf16 \u2603 \ud83d\ude00", "lone \ud800 surrogate", "nul\u0000inside"],
  bigint: [0n, -1n, 15n, -16n, 2n ** 64n, -(10n ** 30n)],
  "sparse-array": holes,
  "nested-object": { a: { b: { c: [1, { d: "deep" }] } }, "0": "index-like", "": "empty key" },
  "null-proto": nullProto,
  date: [new Date(0), new Date(8.64e15), new Date(NaN)],
  regexp: [/a+b*/gimsuy, /[\u{1F600}-\u{1F64F}]/v, /(?<name>x)\1/d],
  map: new Map([[1, "one"], ["k", { v: 1 }], [NaN, null]]),
  set: new Set([1, "two", 3n]),
  arraybuffer: new Uint8Array([1, 2, 3, 255]).buffer,
  "typed-arrays": [new Int8Array([-1]), new Uint16Array([65535]), new Float64Array([Math.PI]), new BigInt64Array([-5n]), new Float32Array([0.5])],
  // Views share a buffer only when the buffer itself came first; alone, each brings its own bytes.
  "shared-buffer-views": [shared, new Uint8Array(shared, 4, 8), new Uint32Array(shared, 0, 4)],
  "views-alone": [new Uint8Array(shared, 4, 8), new DataView(shared, 2, 6)],
  errors: [typeErr, custom, Object.assign(new RangeError("r"), { stack: "" })],
  cycle: cyclic,
  "repeated-refs": (() => { const o = { x: 1 }; return [o, o, { o }]; })(),
};
for (const [name, value] of Object.entries(values)) writeFileSync(join(dir, name), encodeValue(value));

// Hand-made: format corners the host encoder never writes.
const raw = {
  "backref-to-self": [0x08, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x11, 0, 0, 0, 0], // [self]
  "array-huge-length": [0x08, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0],                 // length 2^32-2, no entries
  "object-duplicate-keys": [0x09, 0, 2, 0, 0, 0, 0x14, 1, 0, 0, 0, 0x61, 0x04, 1, 0, 0, 0, 0x14, 1, 0, 0, 0, 0x61, 0x04, 2, 0, 0, 0],
  "bigint-hex-text": [0x06, 0x14, 4, 0, 0, 0, 0x30, 0x78, 0x66, 0x66],           // format-1 decimal tag, "0xff"
  "bigint-hex-negative-zero": [0x1a, 0x14, 2, 0, 0, 0, 0x2d, 0x30],              // "-0"
  "bigint-hex-bad-digit": [0x1a, 0x14, 3, 0, 0, 0, 0x2d, 0x66, 0x67],            // "-fg"
  "typed-array-view-past-buffer": [0x0f, 0x01, 0x0e, 2, 0, 0, 0, 1, 2, 1, 0, 0, 0, 4, 0, 0, 0], // Uint8Array(ab2, 1, 4)
  "dataview-kind": [0x0f, 0x0c, 0x0e, 2, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0, 0, 0],                // DataView(ab2, 0, 2)
};
for (const [name, bytes] of Object.entries(raw)) writeFileSync(join(dir, name), Buffer.from(bytes));
console.log(`fuzz: wrote ${Object.keys(values).length + Object.keys(raw).length} seeds to ${dir}`);

// Snapshot bodies: the envelope is a 32-byte header (body length at offset 12) and a 32-byte digest.
const GUESTS = {
  values: "var n = 1, s = 'text \\u2603', big = 2n ** 70n; var arr = [1, , 3]; var nested = { a: { b: [new Date(0), /x+/g] } };",
  collections: "var m = new Map([[1, { v: 1 }]]); var set = new Set(['a']); var bytes = new Uint8Array([1, 2, 3]); var err = new TypeError('t');",
  "shared-and-cyclic": "var shared = { k: 1 }; var a = { shared }; var b = { shared }; var self = {}; self.self = self;",
  functions: "function add(x, y) { return x + y; } var arrow = (x) => x * 2; async function later() { return 1; } function* gen() { yield 1; }",
  classes: "class Point { constructor(x) { this.x = x; } norm() { return Math.abs(this.x); } } var p = new Point(3); class Sub extends Point {}",
  lexical: "let counter = 5; const frozen = Object.freeze({ f: 1 }); let list = [counter, frozen];",
  placeholders: "var sym = Symbol('s'); var prox = new Proxy({}, {}); var prom = Promise.resolve(1); var closure = (() => { let hidden = 1; return () => hidden; })();",
};
const snapDir = freshDir("snapshot");
for (const [name, code] of Object.entries(GUESTS)) {
  const sb = new Sandbox();
  sb.evalSync(code);
  const bytes = Buffer.from(sb.snapshot());
  sb.dispose();
  const bodyLength = bytes.readUInt32LE(12);
  writeFileSync(join(snapDir, name), bytes.subarray(32, 32 + bodyLength));
}
console.log(`fuzz: wrote ${Object.keys(GUESTS).length} seeds to ${snapDir}`);
