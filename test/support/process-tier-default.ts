// Setup of the "process tier" test project (vitest.config.ts): every Sandbox a suite creates
// without an `isolation` option lives in a helper process, so the Sandbox suites run on both tiers.
import { vi } from "vitest";

vi.mock("../../src/options.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../src/options.js")>();
  return { ...original, SANDBOX_DEFAULTS: Object.freeze({ ...original.SANDBOX_DEFAULTS, isolation: "process" }) };
});

// Read by test/sandbox/tier-under-test.test.ts, which checks that the default took effect.
process.env.QJSN_TEST_TIER = "process";
