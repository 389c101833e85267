// A compromised helper process is hostile to the parent: what it sends is checked, and one that
// breaks the protocol is killed and reported lost, while the parent stays up. The helper here is a
// stand-in script (./fake-helper.ts) that answers the first request and then misbehaves.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { configureProcessPool, PROCESS_POOL_DEFAULTS, Sandbox } from "../../src/index.js";
import { fakeHelper, withHelper } from "./fake-helper.js";

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
