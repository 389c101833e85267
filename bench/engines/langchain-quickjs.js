// @langchain/quickjs 0.6.4: ReplSession (QuickJS-ng asyncify WASM behind an AST transform and a
// process-wide eval queue) and its code-interpreter middleware's eval tool.
import { createRequire } from "node:module";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { makeLookupTool, resolvePtcTools } from "../workloads/fake-tool.js";

const require = createRequire(import.meta.url);
const EVAL_TIMEOUT_MS = 60_000;

let lc;
let nextId = 0;

/** ReplSession tools are LangChain tools taking an object and answering with text. */
function asTool(name, fn) {
  return tool(async ({ args }) => String(await fn(...args)), {
    name,
    description: `bench host function ${name}`,
    schema: z.object({ args: z.array(z.any()) }),
  });
}

function resultValue(result) {
  if (!result.ok) throw new Error(`guest error: ${JSON.stringify(result.error)}`);
  return result.value;
}

export default {
  id: "langchain-quickjs",
  label: "@langchain/quickjs (ReplSession)",
  unsupported: {
    "eval-sync": "ReplSession only has an async eval",
    "sync-host": "tools are async only: a guest cannot call the host synchronously",
  },

  async load() {
    lc = await import("@langchain/quickjs");
    // The WASM module is instantiated lazily by the first session: include it in the load cost.
    const warm = new lc.ReplSession(`bench-load-${nextId++}`);
    await warm.ensureStarted();
    warm.dispose();
    const asyncifyPkg = "@jitl/quickjs-ng-wasmfile-release-asyncify";
    return {
      version: `@langchain/quickjs ${require("@langchain/quickjs/package.json").version} (quickjs-emscripten ${require("quickjs-emscripten/package.json").version})`,
      quickjs: `QuickJS-ng through ${asyncifyPkg} ${require(`${asyncifyPkg}/package.json`).version} (same build as the asyncify row)`,
      build: "emscripten WASM, release build, asyncify; acorn-typescript transform per eval",
      threading: "guest runs on the Node main thread, one eval at a time per process",
    };
  },

  async createSession({ async: asyncFns = {} } = {}) {
    const tools = Object.entries(asyncFns).map(([name, fn]) => asTool(name, fn));
    const session = new lc.ReplSession(`bench-${nextId++}`, { tools, maxPtcCalls: null });
    // Its public surface starts the runtime lazily inside eval(); start it here so (a) measures
    // the runtime, context, console and tool setup that the first eval would otherwise pay.
    await session.ensureStarted();
    if (tools.length > 0) {
      // Guest code calls `host(i)`; ReplSession exposes tools as `tools.name({ ...input })`
      // returning text, so a one-line shim keeps the workload source identical.
      const shims = Object.keys(asyncFns)
        .map((name) => `globalThis.${name} = async (...args) => JSON.parse(await tools.${name}({ args }));`)
        .join("\n");
      resultValue(await session.eval(shims, EVAL_TIMEOUT_MS));
    }
    return {
      // ReplSession settles a promise completion value itself.
      evalAsync: async (code) => resultValue(await session.eval(code, EVAL_TIMEOUT_MS)),
      setString(name, value) {
        // ReplSession has no way to pass data in but code or tools: place the string through the
        // QuickJS context it owns, which is what any data-passing path would end in.
        const handle = session.context.newString(value);
        session.context.setProp(session.context.global, name, handle);
        handle.dispose();
      },
      async spin(code, ms) {
        const result = await session.eval(code, ms);
        if (result.ok) throw new Error("spin loop ended without an interrupt");
      },
      dispose: () => session.dispose(),
    };
  },

  async createEvalTool() {
    const lookup = makeLookupTool();
    const middleware = lc.createCodeInterpreterMiddleware({ ptc: [lookup] });
    const evalTool = middleware.tools[0];
    const config = { configurable: { thread_id: "bench-thread" } };
    await resolvePtcTools(middleware, [lookup, evalTool], config);
    return {
      invoke: (code) => evalTool.invoke({ code }, config),
      dispose: () => middleware.afterAgent?.({}, config),
    };
  },
};
