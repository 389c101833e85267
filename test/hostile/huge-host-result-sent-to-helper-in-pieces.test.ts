// Hazard: an async host function of a process-tier sandbox (a PTC tool) whose result is tens of
// MB. Its encoding reaches the sandbox's handle a piece at a time (appendResult), and the process
// tier joined the pieces into one buffer at settle, on the Node main thread that serves every
// session, and wrote them as one frame. Each piece now goes to the helper in a frame of its own, as
// it comes, and the helper gathers them. The outcomes asserted: no frame the parent writes carries
// more than a few pieces' worth, and the guest gets exactly the value.
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";
import { type NativeModule, native } from "../../src/native.js";

const MiB = 1024 ** 2;

let restore = (): void => {};

afterEach(() => {
  restore();
});

// Not under the sanitizers (scripts/test-sanitize.js sets QJSN_SANITIZED): a helper built with them
// makes system calls (sigaltstack, report files) its seccomp filter refuses.
const underSanitizers = process.env.QJSN_SANITIZED === "1";

describe.skipIf(process.platform !== "linux" || underSanitizers)("a huge async host result on the process tier", () => {
  it("reaches the helper a piece per frame, never joined on the main thread", async () => {
    const holder = native as { HelperChannel: NativeModule["HelperChannel"] };
    const Real = holder.HelperChannel!;
    const sent: number[] = [];
    // The helper channels made from now on report the size of each frame the parent writes.
    holder.HelperChannel = class Recording extends Real {
      override send(frame: Buffer): boolean {
        sent.push(frame.length);
        return super.send(frame);
      }
    };
    restore = () => {
      holder.HelperChannel = Real;
    };
    const s = new Sandbox({
      isolation: "process",
      partition: "huge-result",
      memoryLimitBytes: 256 * MiB,
      copyLimitBytes: 128 * MiB,
    });
    try {
      const text = "abcdefghij".repeat(2.4 * MiB); // 24 MiB of characters
      s.defineAsyncFunction("fetchText", async () => text);
      const seen = await s.eval(
        "(async () => { const t = await fetchText(); return [t.length, t.slice(0, 12), t.slice(-3), t === 'abcdefghij'.repeat(t.length / 10)]; })()",
        { timeoutMs: 60_000 },
      );
      expect(seen).toEqual([text.length, "abcdefghijab", "hij", true]);
      expect(sent.length).toBeGreaterThan(4);
      expect(Math.max(...sent)).toBeLessThan(4 * MiB);
    } finally {
      s.dispose();
    }
  }, 120_000);
});
