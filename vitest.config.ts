import { defineConfig } from "vitest/config";

const shared = {
  pool: "forks" as const,
  testTimeout: 30_000,
  hookTimeout: 30_000,
  execArgv: ["--expose-gc"],
};

export default defineConfig({
  test: {
    projects: [
      { test: { ...shared, name: "in-process", include: ["test/**/*.test.ts"] } },
      // The Sandbox suites again with isolation "process" as the default (test/support/process-tier-default.ts).
      {
        test: {
          ...shared,
          name: "process-tier",
          include: ["test/sandbox/**/*.test.ts"],
          // They measure this process's executor threads and reaper, which a helper process has of its own.
          exclude: ["test/sandbox/dispose-large-heap.test.ts", "test/sandbox/executor-cap.test.ts"],
          setupFiles: ["test/support/process-tier-default.ts"],
        },
      },
    ],
  },
});
