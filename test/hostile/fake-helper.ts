// A stand-in helper process (QUICKJS_NATIVE_HELPER) for tests of a helper that breaks the protocol:
// a script that answers the first request (Create) and then runs `misbehave` for each request after it.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHANNEL_SIZES, ChannelFrame } from "../../src/native.js";

const dir = mkdtempSync(join(tmpdir(), "qjsn-fake-helper-"));

/**
 * Writes the script and returns its path. `misbehave` runs with `id` (the request's sandbox id),
 * `fs`, `frame(kind, id, direct, body)`, `HEADER` and `REPLY` in scope; the script exits when the
 * parent closes the channel.
 */
export function fakeHelper(name: string, misbehave: string): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    `#!${process.execPath}
const fs = require("node:fs");
const HEADER = ${CHANNEL_SIZES.headerBytes};
function frame(kind, id, direct, body) {
  const b = Buffer.alloc(HEADER + body.length);
  b.writeUInt32LE(body.length, 0); b[4] = kind; b[5] = direct ? 1 : 0; b.writeUInt32LE(id, 8);
  body.copy(b, HEADER); return b;
}
function read(n) {
  const b = Buffer.alloc(n); let at = 0;
  while (at < n) { const got = fs.readSync(3, b, at, n - at); if (got === 0) process.exit(0); at += got; }
  return b;
}
const REPLY = ${ChannelFrame.Reply};
let first = true;
for (;;) {
  const h = read(HEADER);
  const id = h.readUInt32LE(8);
  read(h.readUInt32LE(0));
  if (first) { first = false; fs.writeSync(3, frame(REPLY, id, true, Buffer.from([1]))); continue; }
  ${misbehave}
}
`,
  );
  chmodSync(path, 0o755);
  return path;
}

/** Runs `run` with the helper executable set to `path`. */
export function withHelper<T>(path: string, run: () => T): T {
  const saved = process.env.QUICKJS_NATIVE_HELPER;
  process.env.QUICKJS_NATIVE_HELPER = path;
  try {
    return run();
  } finally {
    if (saved === undefined) delete process.env.QUICKJS_NATIVE_HELPER;
    else process.env.QUICKJS_NATIVE_HELPER = saved;
  }
}
