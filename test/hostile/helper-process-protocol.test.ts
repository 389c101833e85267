// A compromised helper process is hostile to the parent: what it sends is checked, and one that
// breaks the protocol is killed and reported lost, while the parent stays up. The helper here is a
// stand-in script (QUICKJS_NATIVE_HELPER) that answers the first request and then misbehaves.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configureProcessPool, PROCESS_POOL_DEFAULTS, Sandbox } from "../../src/index.js";
import { CHANNEL_SIZES, ChannelFrame } from "../../src/native.js";

const dir = mkdtempSync(join(tmpdir(), "qjsn-fake-helper-"));

// A helper that replies OK to Create, then answers the next direct request with `misbehave`'s frames.
function fakeHelper(name: string, misbehave: string): string {
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
function read(n) { const b = Buffer.alloc(n); let at = 0; while (at < n) at += fs.readSync(3, b, at, n - at); return b; }
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

function withHelper<T>(path: string, run: () => T): T {
  const saved = process.env.QUICKJS_NATIVE_HELPER;
  process.env.QUICKJS_NATIVE_HELPER = path;
  try {
    return run();
  } finally {
    if (saved === undefined) delete process.env.QUICKJS_NATIVE_HELPER;
    else process.env.QUICKJS_NATIVE_HELPER = saved;
  }
}

// No warm helpers: each sandbox's helper is spawned from the script the test names.
beforeAll(() => configureProcessPool({ min: 0 }));
afterAll(() => configureProcessPool({ min: PROCESS_POOL_DEFAULTS.min }));

describe.skipIf(process.platform !== "linux")("a helper that breaks the protocol", () => {
  it("two direct frames for one request: killed and reported lost", () => {
    const path = fakeHelper(
      "two-replies",
      "fs.writeSync(3, frame(REPLY, id, true, Buffer.alloc(4))); fs.writeSync(3, frame(REPLY, id, true, Buffer.alloc(4)));",
    );
    const s = withHelper(path, () => new Sandbox({ isolation: "process", allowUnconfined: true, partition: "fake-2" }));
    try {
      expect(() => s.evalSync("1")).toThrow(expect.objectContaining({ code: "WORKER_LOST" }));
      expect(s.broken).toBe(true);
    } finally {
      s.dispose();
    }
  });

  it("an outcome with an unknown status: killed as malformed, and the parent keeps working", () => {
    const path = fakeHelper("bad-status", "fs.writeSync(3, frame(REPLY, id, true, Buffer.from([0xff, 0xff, 0, 0])));");
    const s = withHelper(path, () => new Sandbox({ isolation: "process", allowUnconfined: true, partition: "fake-3" }));
    try {
      expect(() => s.evalSync("1")).toThrow(
        expect.objectContaining({ code: "WORKER_LOST", message: expect.stringContaining("malformed") }),
      );
      expect(new Sandbox().evalSync("6 * 7")).toBe(42);
    } finally {
      s.dispose();
    }
  });
});
