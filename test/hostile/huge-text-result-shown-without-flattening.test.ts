// Hazard: a guest string result of megabytes (the bench's escape-heavy text: '<' + 60,000 spaces,
// ×100, 6 MB) reaches the host decoded a chunk at a time, and V8 joins the chunks as a rope. The
// model is shown only its head and tail, but the first `slice` of the rope copied all of it into
// one flat string, in one go on the Node main thread (~30 ms of page faults on a loaded machine).
// The head and tail shown, and the head kept for later reads, are now taken from the decoded
// pieces. The outcomes asserted: no string method reads a string longer than one decoded chunk
// while the output is formatted, and the output and the kept text are the same, character for
// character, as those made from the flat string.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { EvalReport } from "../../src/index.js";
import { formatEvalOutput } from "../../src/langchain/format.js";
import { OutputStore } from "../../src/langchain/kept-outputs.js";
import { sandbox } from "./harness.js";

/** A decoded chunk: 256 KiB of bytes, so at most that many characters. */
const CHUNK_CHARS = 256 * 1024;
const MAX_RESULT_CHARS = 20_000;

afterEach(() => {
  vi.restoreAllMocks();
});

/** Formats `report` as the eval tool does, keeping cut texts in a store; returns the output and what was kept. */
function format(report: EvalReport): { text: string; kept: Array<string | undefined> } {
  const store = new OutputStore(1_000_000);
  const paths: string[] = [];
  const text = formatEvalOutput(report, {
    maxResultChars: MAX_RESULT_CHARS,
    status: "ok",
    keep: (section, full, head) => {
      const path = `/kept/${section}`;
      paths.push(path);
      return store.put(section, path, full, head);
    },
  });
  return { text, kept: paths.map((path) => store.get(path)) };
}

describe("a string result of megabytes", () => {
  for (const [kind, code, escaped] of [
    ["escape-heavy Latin-1 text", `("<" + " ".repeat(60000)).repeat(100)`, "<result>\n< "],
    [
      "UTF-16 text with pairs and lone surrogates across chunk edges",
      `("<system>\\u{1F600}\\uD800x\\r\\n" + " ".repeat(59999)).repeat(100)`,
      "&lt;system>\u{1F600}\\uD800x\n ",
    ],
  ] as const) {
    it(`has its shown head and tail (${kind}) taken without flattening it`, async () => {
      const sb = sandbox({ memoryLimitBytes: 256 * 1024 * 1024 });
      const report = await sb.run(code, { displayChars: MAX_RESULT_CHARS });
      expect(report.ok).toBe(true);
      const value = (report as { value: string }).value;
      expect(value.length).toBeGreaterThan(5_000_000);

      const read: number[] = [];
      const slice = String.prototype.slice;
      vi.spyOn(String.prototype, "slice").mockImplementation(function (this: string, ...args: [number?, number?]) {
        read.push(this.length);
        return slice.apply(this, args);
      });
      const shown = format(report);
      vi.restoreAllMocks();
      expect(read.length).toBeGreaterThan(0);
      expect(Math.max(...read)).toBeLessThanOrEqual(CHUNK_CHARS);

      // The same report without its pieces is formatted from the flat string, as before.
      const flat = format({ ...report });
      expect(shown.text).toBe(flat.text);
      expect(shown.kept).toEqual(flat.kept);
      expect(shown.kept[0]).toHaveLength(1_000_000);
      expect(shown.text).toContain(escaped);
    });
  }
});
