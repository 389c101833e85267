// quickjs-native (this repository): QuickJS-ng compiled into a Node-API addon. Loaded from a
// checkout's own build output (dist/ + build/Release), never from an installed copy: this
// repository's for the "quickjs-native" engine, another built checkout's for the baseline engine.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { makeLookupTool, resolvePtcTools } from "../workloads/fake-tool.js";

const MEMORY_LIMIT = 64 * 1024 * 1024;

/** Why the library cannot be loaded from the checkout at `root`, or null when it can. */
function missingBuild(root) {
  const addonDir = `${root}build/Release`;
  const hasAddon = existsSync(addonDir) && readdirSync(addonDir).some((f) => f.endsWith(".node"));
  if (!hasAddon) return "native addon not built (build/Release/*.node missing): run `npm run build`";
  if (!existsSync(`${root}dist/index.js`))
    return "TypeScript layer not built (dist/index.js missing): run `npm run build:ts`";
  return null;
}

function hasSnapshots(api) {
  return typeof api?.Sandbox?.restore === "function" && typeof api?.Sandbox?.prototype?.snapshot === "function";
}

/** The adapter's session shape over one Sandbox (a new one or a restored one) of `api`. */
function session(api, sb) {
  return {
    evalSync: (code) => sb.evalSync(code),
    // sb.eval returns a promise completion value as-is (it cannot be copied out) and awaits
    // only top-level `await`; the other engines settle a returned promise, so the same guest
    // source is awaited explicitly when the case says its value is a promise.
    evalAsync: (code, { awaitResult = false } = {}) => sb.eval(awaitResult ? `await (${code})` : code),
    setString(name, value) {
      sb.setGlobal(name, value);
    },
    async spin(code, ms) {
      try {
        await sb.eval(code, { timeoutMs: ms });
      } catch {
        return;
      }
      throw new Error("spin loop ended without a timeout");
    },
    snapshot: () => sb.snapshot(),
    restore(bytes) {
      const restored = api.Sandbox.restore(bytes, { memoryLimitBytes: MEMORY_LIMIT });
      return session(api, restored.sandbox ?? restored);
    },
    dispose: () => sb.dispose(),
  };
}

/**
 * The adapter for the quickjs-native build of the checkout at `root` (a path ending in "/");
 * `checkout` says which one in the report's engine table.
 */
export function nativeAdapter({ id, label, root, checkout }) {
  let api;
  return {
    id,
    label,
    offThread: true, // async evals run off the Node main thread (latency cases)
    get unsupported() {
      const reasons = {};
      if (api && !hasSnapshots(api)) {
        const why = "snapshot API not present yet (sb.snapshot() / Sandbox.restore())";
        reasons["snapshot-10k"] = why;
        reasons["snapshot-1m"] = why;
      }
      return reasons;
    },

    async load() {
      const missing = missingBuild(root);
      if (missing) throw new Error(missing);
      api = await import(pathToFileURL(`${root}dist/index.js`).href);
      const lock = JSON.parse(readFileSync(`${root}deps/quickjs-ng.lock.json`, "utf8"));
      const pkg = JSON.parse(readFileSync(`${root}package.json`, "utf8"));
      return {
        version: `quickjs-native ${pkg.version} (${checkout})`,
        quickjs: `QuickJS-ng ${lock.version} + deps/patches`,
        build: "native addon, cmake-js Release, engine at -O2",
        threading: "evalSync on the calling thread; eval on addon-owned executor threads",
      };
    },

    createSession({ sync = {}, async: asyncFns = {} } = {}) {
      const sb = new api.Sandbox({ memoryLimitBytes: MEMORY_LIMIT });
      for (const [name, fn] of Object.entries(sync)) sb.defineFunction(name, fn);
      for (const [name, fn] of Object.entries(asyncFns)) sb.defineAsyncFunction(name, (args) => fn(...args));
      return session(api, sb);
    },

    async createEvalTool() {
      const langchainEntry = `${root}dist/langchain/index.js`;
      if (!existsSync(langchainEntry)) throw new Error("middleware not built yet (dist/langchain/index.js missing)");
      const lc = await import(pathToFileURL(langchainEntry).href);
      if (typeof lc.createCodeInterpreterMiddleware !== "function") {
        throw new Error("quickjs-native/langchain does not export createCodeInterpreterMiddleware yet");
      }
      const lookup = makeLookupTool();
      const middleware = lc.createCodeInterpreterMiddleware({ ptc: [lookup] });
      const evalTool = middleware.tools?.find((t) => t.name === "eval") ?? middleware.tools?.[0];
      if (!evalTool) throw new Error("the middleware exposes no eval tool");
      const config = { configurable: { thread_id: "bench-thread" } };
      await resolvePtcTools(middleware, [lookup, evalTool], config);
      return {
        invoke: (code) => evalTool.invoke({ code }, config),
        dispose: () => middleware.dispose?.(),
      };
    },
  };
}

export default nativeAdapter({
  id: "quickjs-native",
  label: "quickjs-native (this package)",
  root: fileURLToPath(new URL("../../", import.meta.url)),
  checkout: "this checkout",
});
