// Hostile classes "1 MB code argument" for the event-loop case (bench/lib/hostile-case.js): a
// model-written code argument of 1 MB, JavaScript and TypeScript, through the middleware's eval
// tool with `maxCodeBytes` raised to take it (the default refuses it unread), and the same
// argument through a bare LangChain tool of the same JSON schema that does nothing: what
// LangChain's own path (schema validation, callbacks, run tree) costs the main thread by itself.
// Target, as for every hostile class: no event-loop gap over 20 ms.
import { createRequire } from "node:module";

const KiB = 1024;
const CODE_BYTES = 1024 * KiB;

/** Lines of code up to `bytes` (ASCII, so characters are bytes); hostile-case.js fills its own with it. */
export function fill(line, bytes) {
  const lines = [];
  let size = 0;
  for (let i = 0; size + line(i).length + 1 <= bytes; i++) {
    lines.push(line(i));
    size += line(i).length + 1;
  }
  return lines.join("\n");
}

/**
 * The classes, as `[title, prepare]` pairs like hostile-case.js's (prepare runs outside the measured
 * window and returns the work), and `dispose`. `lc` is the package's langchain entry, `root` the
 * package root (LangChain's own modules are resolved from there).
 */
export function codeArgumentClasses(lc, root) {
  const middleware = lc.createCodeInterpreterMiddleware({ executionTimeoutMs: 10_000, maxCodeBytes: 2 * CODE_BYTES });
  const evalTool = middleware.tools[0];
  const { tool } = createRequire(`${root}package.json`)("@langchain/core/tools");
  const bare = tool(async () => "ok", { name: "eval", description: "does nothing", schema: evalTool.schema });
  const javascript = fill((i) => `var j${i} = ${i} + 1;`, CODE_BYTES);
  const typescript = fill((i) => `const t${i}: number = ${i};`, CODE_BYTES);
  let thread = 0;
  const via = (target, code) => () => () =>
    target.invoke({ code }, { configurable: { thread_id: `code-argument-${thread++}` } });
  return {
    dispose: () => middleware.dispose(),
    cases: [
      ["1 MB of JavaScript (maxCodeBytes 2 MiB)", via(evalTool, javascript)],
      ["1 MB of TypeScript (maxCodeBytes 2 MiB)", via(evalTool, typescript)],
      ["1 MB code argument, LangChain alone (bare tool, same schema)", via(bare, typescript)],
    ],
  };
}
