// One adapter shape for the three quickjs-emscripten variants (sync bellard, sync ng, asyncify
// ng): the same marshalling and session code, so the variants differ only in the WASM build.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { shouldInterruptAfterDeadline } from "quickjs-emscripten";
import { newQuickJSAsyncWASMModuleFromVariant, newQuickJSWASMModuleFromVariant } from "quickjs-emscripten-core";

const require = createRequire(import.meta.url);
const MEMORY_LIMIT = 64 * 1024 * 1024;

function packageVersion(name) {
  return require(`${name}/package.json`).version;
}

/** "QuickJS-ng v0.12.1" style label, read from the variant's generated README. */
function vendoredQuickjs(variantPackage) {
  const readme = readFileSync(join(dirname(require.resolve(`${variantPackage}/package.json`)), "README.md"), "utf8");
  const library = /^## Library: (\S+)/m.exec(readme)?.[1] ?? "unknown library";
  const version = /^Version \[([^\]]+)\]/m.exec(readme)?.[1] ?? "unknown version";
  const name = { quickjs: "QuickJS (bellard)", "quickjs-ng": "QuickJS-ng" }[library] ?? library;
  return `${name} ${version.replace(/^v(?=\d)/, "")}`;
}

/** Guest handle for a host value (the workloads only pass numbers and strings back in). */
function toHandle(ctx, value) {
  switch (typeof value) {
    case "number":
      return ctx.newNumber(value);
    case "string":
      return ctx.newString(value);
    case "boolean":
      return value ? ctx.true : ctx.false;
    case "undefined":
      return ctx.undefined;
    default:
      throw new TypeError(`bench adapter cannot pass a ${typeof value} into the guest`);
  }
}

/** Dumps and disposes an eval result, throwing the guest error as a host Error. */
function unwrap(ctx, result) {
  if (result.error) {
    const error = ctx.dump(result.error);
    result.error.dispose();
    throw new Error(`guest error: ${JSON.stringify(error)}`);
  }
  return result.value;
}

/** Host value of a handle that may be a promise, settling it through the job queue. */
async function settle(ctx, handle) {
  const state = ctx.getPromiseState(handle);
  if (state.type === "fulfilled" && state.notAPromise) {
    const value = ctx.dump(handle);
    handle.dispose();
    return value;
  }
  const pending = ctx.resolvePromise(handle);
  handle.dispose();
  ctx.runtime.executePendingJobs();
  const valueHandle = unwrap(ctx, await pending);
  const value = ctx.dump(valueHandle);
  valueHandle.dispose();
  return value;
}

/**
 * Builds an adapter for one variant package.
 * @param {{ id: string, label: string, variantPackage: string, asyncify: boolean }} spec
 */
export function emscriptenAdapter(spec) {
  let wasmModule;
  return {
    id: spec.id,
    label: spec.label,
    unsupported: spec.asyncify
      ? {}
      : {
          "eval-async":
            "this build has no async eval (evalCodeAsync is asyncify-only); case (e) settles the returned promise with evalCode + resolvePromise",
        },

    async load() {
      const variant = (await import(spec.variantPackage)).default;
      wasmModule = spec.asyncify
        ? await newQuickJSAsyncWASMModuleFromVariant(variant)
        : await newQuickJSWASMModuleFromVariant(variant);
      return {
        version: `quickjs-emscripten ${packageVersion("quickjs-emscripten")}, ${spec.variantPackage} ${packageVersion(spec.variantPackage)}`,
        quickjs: vendoredQuickjs(spec.variantPackage),
        build: `emscripten WASM, release build${spec.asyncify ? ", asyncify" : ""}`,
        threading: "guest runs on the Node main thread",
      };
    },

    createSession({ sync = {}, async: asyncFns = {} } = {}) {
      const runtime = wasmModule.newRuntime();
      runtime.setMemoryLimit(MEMORY_LIMIT);
      const ctx = runtime.newContext();
      const defineGlobal = (name, handle) => {
        ctx.setProp(ctx.global, name, handle);
        handle.dispose();
      };
      for (const [name, fn] of Object.entries(sync)) {
        defineGlobal(
          name,
          ctx.newFunction(name, (...args) => toHandle(ctx, fn(...args.map((a) => ctx.dump(a))))),
        );
      }
      for (const [name, fn] of Object.entries(asyncFns)) {
        // The guest gets a promise settled through the job queue. Asyncified functions are no
        // option for `await host(i)` loops: after the first await the loop continues inside
        // executePendingJobs(), a synchronous call that cannot suspend (the WASM traps).
        const handle = ctx.newFunction(name, (...args) => {
          const deferred = ctx.newPromise();
          fn(...args.map((a) => ctx.dump(a))).then(
            (value) => {
              const h = toHandle(ctx, value);
              deferred.resolve(h);
              h.dispose();
            },
            (error) => {
              const h = ctx.newError(String(error));
              deferred.reject(h);
              h.dispose();
            },
          );
          deferred.settled.then(() => runtime.executePendingJobs());
          return deferred.handle;
        });
        defineGlobal(name, handle);
      }
      return {
        evalSync(code) {
          const handle = unwrap(ctx, ctx.evalCode(code));
          const value = ctx.dump(handle);
          handle.dispose();
          return value;
        },
        async evalAsync(code) {
          const result = spec.asyncify ? await ctx.evalCodeAsync(code) : ctx.evalCode(code);
          return settle(ctx, unwrap(ctx, result));
        },
        setString(name, value) {
          defineGlobal(name, ctx.newString(value));
        },
        async spin(code, ms) {
          runtime.setInterruptHandler(shouldInterruptAfterDeadline(Date.now() + ms));
          const result = spec.asyncify ? await ctx.evalCodeAsync(code) : ctx.evalCode(code);
          runtime.removeInterruptHandler();
          if (!result.error) throw new Error("spin loop ended without an interrupt");
          result.error.dispose();
        },
        dispose() {
          ctx.dispose();
          runtime.dispose();
        },
      };
    },
  };
}
