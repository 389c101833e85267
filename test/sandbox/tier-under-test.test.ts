// The Sandbox suites run on both tiers: the "process-tier" test project (vitest.config.ts) makes
// "process" the default isolation (test/support/process-tier-default.ts). This checks it took effect.
import { expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";

it("a Sandbox without an isolation option lives in the tier of the test project", () => {
  const s = new Sandbox();
  try {
    const processTier = process.env.QJSN_TEST_TIER === "process";
    expect(s.options.isolation).toBe(processTier ? "process" : "in-process");
    expect(s.processId !== undefined).toBe(processTier);
  } finally {
    s.dispose();
  }
});
