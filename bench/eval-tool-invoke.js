// The eval tool end to end (`evalTool.invoke({ code: "1 + 1" })` through the middleware, on one
// thread), and the cost of constructing a middleware (where its options are resolved, once).
// Prints medians in µs. Compare two built checkouts with a whole-process A/B timer, or read the
// printed medians: `node bench/eval-tool-invoke.js [PACKAGE_ROOT] [EVALS]`.
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const root = resolve(process.argv[2] ?? new URL("..", import.meta.url).pathname);
const evals = Number(process.argv[3] ?? 2000);
const { createCodeInterpreterMiddleware } = await import(pathToFileURL(`${root}/dist/langchain/index.js`).href);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const micros = (start) => Number(process.hrtime.bigint() - start) / 1000;

const constructions = [];
for (let i = 0; i < 200; i++) {
  const start = process.hrtime.bigint();
  const middleware = createCodeInterpreterMiddleware({ executionTimeoutMs: 2000, maxResultChars: 2000 });
  constructions.push(micros(start));
  middleware.dispose();
}

const middleware = createCodeInterpreterMiddleware();
const evalTool = middleware.tools[0];
const config = { configurable: { thread_id: "bench" } };
for (let i = 0; i < 200; i++) await evalTool.invoke({ code: "1 + 1" }, config);
const times = [];
for (let i = 0; i < evals; i++) {
  const start = process.hrtime.bigint();
  await evalTool.invoke({ code: "1 + 1" }, config);
  times.push(micros(start));
}
middleware.dispose();
console.log(JSON.stringify({ root, constructUs: median(constructions), evalToolInvokeUs: median(times), evals }));
