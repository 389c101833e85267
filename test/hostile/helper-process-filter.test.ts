// The helper's seccomp filter is in force: a test-only request (compiled only into helpers built
// with QJSN_TEST_HOOKS, `npm run build:native:test-helper`) makes a confined helper call open(), and
// the filter kills it, which its sandboxes see as WORKER_LOST. A release helper has no such
// request: it takes the frame for a malformed one and exits.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { configureProcessPool, PROCESS_POOL_DEFAULTS } from "../../src/index.js";
import { createRemoteHandle } from "../../src/process-tier/pool.js";
import type { RemoteHandle } from "../../src/process-tier/remote-handle.js";
import { validateOptions } from "../../src/validate.js";
import { sandbox } from "./harness.js";

// Not under the sanitizers (scripts/test-sanitize.js sets QJSN_SANITIZED): a helper built with them
// makes system calls (sigaltstack, report files) its seccomp filter refuses.
const underSanitizers = process.env.QJSN_SANITIZED === "1";

const TEST_HELPER = fileURLToPath(new URL("../../build/test-hooks/quickjs-native-helper", import.meta.url));
const testHelperBuilt = existsSync(TEST_HELPER);
const OPEN = 2;
const NULL_DEREFERENCE = 1;

// No warm helpers: each victim's helper is spawned from the binary the test names.
beforeAll(() => configureProcessPool({ min: 0 }));
afterAll(() => configureProcessPool({ min: PROCESS_POOL_DEFAULTS.min }));

const raw: RemoteHandle[] = [];
afterEach(() => {
  for (const h of raw.splice(0)) h.dispose();
});

// A sandbox evaluating in a helper of `partition` (spawned from `helper`), and a bare handle in the
// same helper to send the test request through.
function victim(partition: string, helper?: string): { pending: Promise<unknown>; handle: RemoteHandle } {
  const saved = process.env.QUICKJS_NATIVE_HELPER;
  if (helper) process.env.QUICKJS_NATIVE_HELPER = helper;
  try {
    const s = sandbox({ isolation: "process", partition, executionTimeoutMs: 60_000 });
    const handle = createRemoteHandle(validateOptions({ isolation: "process", partition }), () => undefined);
    raw.push(handle);
    expect(handle.processId).toBe(s.processId);
    return { pending: s.eval("while (true) {}"), handle };
  } finally {
    if (saved === undefined) delete process.env.QUICKJS_NATIVE_HELPER;
    else process.env.QUICKJS_NATIVE_HELPER = saved;
  }
}

describe.skipIf(underSanitizers)("the helper's confinement", () => {
  it("a release helper knows no test request: it exits, and its sandboxes are lost", async () => {
    const { pending, handle } = victim("hook-release");
    handle.testHook(OPEN);
    await expect(pending).rejects.toMatchObject({
      code: "WORKER_LOST",
      message: expect.stringMatching(/exited \(code 2\)/),
    });
  });

  it.skipIf(!testHelperBuilt)(
    "a confined helper that calls open() is killed by its seccomp filter and reported lost",
    async () => {
      const { pending, handle } = victim("hook-open", TEST_HELPER);
      handle.testHook(OPEN);
      await expect(pending).rejects.toMatchObject({ code: "WORKER_LOST", message: expect.stringContaining("SIGSYS") });
    },
  );

  it.skipIf(!testHelperBuilt)("a helper that dereferences null is reported lost with SIGSEGV", async () => {
    const { pending, handle } = victim("hook-segv", TEST_HELPER);
    handle.testHook(NULL_DEREFERENCE);
    await expect(pending).rejects.toMatchObject({ code: "WORKER_LOST", message: expect.stringContaining("SIGSEGV") });
  });
});
