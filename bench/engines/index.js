// Registry of engine adapters, in report order. Each adapter module documents its engine.
//
// Adapter contract (all engines implement the same primitives so the workloads stay identical):
//   id, label                 stable key and display name
//   unsupported               { caseId: reason } for cases the engine has no way to run
//   offThread?                true when async evals run off the Node main thread (latency cases)
//   load()                    one-time import/instantiation; resolves to { version, quickjs, build, threading }
//   createSession({ sync, async })  a live runtime+context with host functions `name -> fn`; returns
//     { evalSync?(code), evalAsync(code, { awaitResult }), setString(name, s), spin(code, ms), dispose(),
//       snapshot?(), restore?(bytes) }
//   createEvalTool?()         the engine's LangChain eval tool: { invoke(code), dispose() }
//
// "quickjs-native-baseline" (another built checkout of this package) is not in ENGINE_IDS: it runs
// only when `bench/run.js --baseline=PATH` asks for it.

/** The environment variable through which bench/run.js hands `--baseline`'s path to its children. */
export const BASELINE_ENV = "QJSN_BENCH_BASELINE";

/** The id of the baseline engine (`--baseline=PATH`). */
export const BASELINE_ID = "quickjs-native-baseline";

/**
 * The engines a `--baseline` run measures: `engines` with the baseline once, right after
 * quickjs-native when that runs too (so the two run back to back), else first.
 */
export function withBaselineEngine(engines) {
  const others = engines.filter((id) => id !== BASELINE_ID);
  const at = others.indexOf("quickjs-native");
  return [...others.slice(0, at + 1), BASELINE_ID, ...others.slice(at + 1)];
}

export const ENGINE_IDS = [
  "quickjs-native",
  "wasm-bellard-sync",
  "wasm-ng-sync",
  "wasm-ng-asyncify",
  "langchain-quickjs",
  "isolated-vm",
];

const modules = {
  "quickjs-native": "./quickjs-native.js",
  [BASELINE_ID]: "./quickjs-native-baseline.js",
  "wasm-bellard-sync": "./qjs-emscripten-bellard-sync.js",
  "wasm-ng-sync": "./qjs-emscripten-ng-sync.js",
  "wasm-ng-asyncify": "./qjs-emscripten-ng-asyncify.js",
  "langchain-quickjs": "./langchain-quickjs.js",
  "isolated-vm": "./isolated-vm.js",
};

/** The adapter for an engine id. */
export async function loadAdapter(id) {
  if (!modules[id]) throw new Error(`unknown engine ${id}`);
  return (await import(modules[id])).default;
}
