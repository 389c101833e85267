import { describe, expect, it } from "vitest";
import { keptOutputPath, OutputStore, StateFilesWriter } from "../../src/langchain/kept-outputs.js";
import { EvalActivity } from "../../src/langchain/activity.js";
import { renderToolSignatures } from "../../src/langchain/signatures.js";

describe("OutputStore: bounded per thread, oldest evicted first", () => {
  it("evicts the oldest texts once the cap would be exceeded, and keeps the newest whole", () => {
    const store = new OutputStore(10);
    store.put("console", "/a", "aaaa");
    store.put("console", "/b", "bbbb");
    const c = store.put("result", "/c", "cccc");
    expect(store.paths()).toEqual(["/b", "/c"]);
    expect(store.size).toBe(8);
    expect(store.get("/a")).toBeUndefined();
    expect(c).toEqual({ section: "result", path: "/c", store: "store", chars: 4, complete: true });
  });

  it("keeps only the head of a text larger than the cap, and says so", () => {
    const store = new OutputStore(5);
    store.put("console", "/a", "aa");
    const kept = store.put("console", "/big", "0123456789");
    expect(store.get("/big")).toBe("01234");
    expect(store.paths()).toEqual(["/big"]);
    expect(kept.complete).toBe(false);
  });
});

describe("StateFilesWriter: kept outputs in the agent's files", () => {
  it("writes a text file and deletes (null) the oldest kept outputs past the cap, leaving the agent's own files alone", () => {
    const files = {
      "/notes.md": {
        content: "x".repeat(50),
        mimeType: "text/plain",
        created_at: "2026-01-01T00:00:00.000Z",
        modified_at: "",
      },
      "/eval_outputs/old/console.txt": {
        content: "o".repeat(6),
        mimeType: "text/plain",
        created_at: "2026-01-01T00:00:00.000Z",
        modified_at: "",
      },
      "/eval_outputs/mid/console.txt": {
        content: "m".repeat(3),
        mimeType: "text/plain",
        created_at: "2026-01-02T00:00:00.000Z",
        modified_at: "",
      },
    };
    const writer = new StateFilesWriter(files, 10, () => new Date("2026-02-01T00:00:00.000Z"));
    const kept = writer.put("console", keptOutputPath("call/9", "console"), "n".repeat(5));
    expect(kept).toEqual({
      section: "console",
      path: "/eval_outputs/call_9/console.txt",
      store: "files",
      chars: 5,
      complete: true,
    });
    expect(writer.updates).toEqual([
      [
        "files",
        {
          "/eval_outputs/old/console.txt": null,
          "/eval_outputs/call_9/console.txt": {
            content: "nnnnn",
            mimeType: "text/plain",
            created_at: "2026-02-01T00:00:00.000Z",
            modified_at: "2026-02-01T00:00:00.000Z",
          },
        },
      ],
    ]);
  });

  it("has no update when nothing was kept", () => {
    expect(new StateFilesWriter({}, 10).updates).toEqual([]);
  });
});

describe("EvalActivity", () => {
  it("a writer that throws does not break the eval's bookkeeping", () => {
    const activity = new EvalActivity("call_1", () => {
      throw new Error("stream closed");
    });
    activity.toolStarted("a").end(true);
    expect(Object.fromEntries(activity.toolCalls)).toEqual({ a: 1 });
    expect(activity.inFlight).toEqual([]);
  });

  it("remembers calls still running when the eval's signal fired", () => {
    const controller = new AbortController();
    const activity = new EvalActivity("call_1", undefined);
    activity.toolStarted("done", controller.signal).end(true);
    activity.toolStarted("slow", controller.signal);
    controller.abort();
    expect(activity.cutOff).toEqual(["slow"]);
  });
});

describe("signatures are cached by schema, not by name", () => {
  it("a tool that keeps its name but changes its schema renders its new input", () => {
    const base = { name: "lookup", camelName: "lookup", description: "Looks up." };
    const first = renderToolSignatures([
      { ...base, schema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] } },
    ]);
    const second = renderToolSignatures([
      { ...base, schema: { type: "object", properties: { key: { type: "number" } }, required: ["key"] } },
    ]);
    expect(first).toContain("id: string;");
    expect(second).toContain("key: number;");
    expect(second).not.toContain("id: string;");
  });
});
