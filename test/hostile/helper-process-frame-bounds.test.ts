// A compromised helper cannot make the parent allocate without bound: a frame's buffer grows only
// with the bytes that arrived (a helper that announces a large frame and stalls costs what it
// sent), and a frame larger than the sandbox's declared caps allow kills the helper at once.
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configureProcessPool, PROCESS_POOL_DEFAULTS, Sandbox } from "../../src/index.js";
import { CHANNEL_SIZES, ChannelFrame } from "../../src/native.js";
import { fakeHelper, withHelper } from "./fake-helper.js";

const MiB = 1024 ** 2;

// Answers an eval by announcing a direct reply of `bytes`, sends 64 KiB of it and stalls (reads on
// until the parent closes); answers the sandbox's setup requests with ok.
function announceAndStall(name: string, bytes: number): string {
  return fakeHelper(
    name,
    `if (h[4] !== ${ChannelFrame.EvalSync}) { fs.writeSync(3, frame(REPLY, id, true, Buffer.from([1]))); continue; }
  const head = Buffer.alloc(HEADER); head.writeUInt32LE(${bytes}, 0); head[4] = REPLY; head[5] = 1;
  head.writeUInt32LE(id, 8); fs.writeSync(3, head); fs.writeSync(3, Buffer.alloc(65536));`,
  );
}

// A stalled helper is killed once an evalSync's budget and the reply grace are spent: a short grace
// keeps the wait of the first test to a few seconds (the default, 30 s, would outlast its timeout).
beforeAll(() => configureProcessPool({ min: 0, replyGraceMs: 1000 }));
afterAll(() =>
  configureProcessPool({ min: PROCESS_POOL_DEFAULTS.min, replyGraceMs: PROCESS_POOL_DEFAULTS.replyGraceMs }),
);

describe.skipIf(process.platform !== "linux")("a helper that announces a large frame", () => {
  // First in the file: the process's peak resident memory is measured against what it was before.
  it("and stalls costs the parent what it sent, not what it announced", () => {
    const announced = CHANNEL_SIZES.maxFrameBytes - MiB;
    const path = announceAndStall("announce-and-stall", announced);
    const s = withHelper(
      path,
      () =>
        new Sandbox({
          isolation: "process",
          allowUnconfined: true,
          partition: "stall",
          memoryLimitBytes: 256 * MiB,
          copyLimitBytes: 256 * MiB,
        }),
    );
    try {
      const peakBefore = process.resourceUsage().maxRSS * 1024;
      // The parent waits out the deadline, the helper's partial frame in its reader meanwhile.
      expect(() => s.evalSync("1", { timeoutMs: 1000 })).toThrow(expect.objectContaining({ code: "WORKER_LOST" }));
      const grown = process.resourceUsage().maxRSS * 1024 - peakBefore;
      expect(grown).toBeLessThan(announced / 4);
    } finally {
      s.dispose();
    }
  }, 25_000);

  it("over the sandbox's declared caps is killed at once and reported lost", () => {
    const path = announceAndStall("announce-over-caps", 64 * MiB);
    const s = withHelper(
      path,
      () =>
        new Sandbox({ isolation: "process", allowUnconfined: true, partition: "over-caps", copyLimitBytes: 1 * MiB }),
    );
    try {
      // Far beyond the deadline: the kill does not wait for it.
      expect(() => s.evalSync("1", { timeoutMs: 60_000 })).toThrow(
        expect.objectContaining({
          code: "WORKER_LOST",
          message: expect.stringContaining("larger than its sandboxes' caps"),
        }),
      );
      expect(s.broken).toBe(true);
      expect(new Sandbox().evalSync("6 * 7")).toBe(42);
    } finally {
      s.dispose();
    }
  }, 120_000);
});

describe.skipIf(process.platform !== "linux")("a helper that never answers", () => {
  it("fails the new sandbox with WORKER_LOST once the reply grace is spent, not after the default 30 s", () => {
    const dir = mkdtempSync(join(tmpdir(), "qjsn-silent-helper-"));
    const path = join(dir, "silent");
    // Reads every request and answers none, until the parent closes the channel.
    writeFileSync(
      path,
      `#!${process.execPath}\nconst fs = require("node:fs"); const b = Buffer.alloc(65536);\nfor (;;) if (fs.readSync(3, b, 0, b.length, null) === 0) process.exit(0);\n`,
    );
    chmodSync(path, 0o755);
    expect(() =>
      withHelper(path, () => new Sandbox({ isolation: "process", allowUnconfined: true, partition: "silent" })),
    ).toThrow(expect.objectContaining({ code: "WORKER_LOST" }));
  }, 20_000);
});

describe("the reply grace of the process pool", () => {
  it("is validated and reported in force", () => {
    expect(configureProcessPool({}).replyGraceMs).toBe(1000);
    expect(() => configureProcessPool({ replyGraceMs: 99 })).toThrow(
      expect.objectContaining({
        code: "INVALID_ARGUMENT",
        message: expect.stringContaining("processPool.replyGraceMs"),
      }),
    );
    expect(() => configureProcessPool({ replyGraceMs: 1.5 })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => configureProcessPool({ replyGrace: 5 } as never)).toThrow(
      expect.objectContaining({ message: expect.stringContaining("replyGraceMs") }),
    );
    expect(configureProcessPool({}).replyGraceMs).toBe(1000);
  });
});
