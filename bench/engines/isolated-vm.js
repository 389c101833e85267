// isolated-vm 5: V8 isolates; async eval and async callbacks run the guest on a thread pool.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const MEMORY_LIMIT_MB = 64;

let ivm;

export default {
  id: "isolated-vm",
  label: "isolated-vm 5 (V8)",
  offThread: true, // async evals run off the Node main thread (latency cases)
  unsupported: {},

  async load() {
    ivm = (await import("isolated-vm")).default;
    return {
      version: `isolated-vm ${require("isolated-vm/package.json").version}`,
      quickjs: `not QuickJS: V8 ${process.versions.v8} (Node's own)`,
      build: "native addon built from source by node-gyp (Release); the V8 inside the Node binary",
      threading: "sync eval on the calling thread; async eval on isolated-vm's thread pool",
    };
  },

  createSession({ sync = {}, async: asyncFns = {} } = {}) {
    const isolate = new ivm.Isolate({ memoryLimit: MEMORY_LIMIT_MB });
    const context = isolate.createContextSync();
    for (const [name, fn] of Object.entries(sync)) context.global.setSync(name, new ivm.Callback(fn));
    for (const [name, fn] of Object.entries(asyncFns)) {
      // A Callback cannot hand a host promise to the guest; a Reference applied with
      // `result.promise` can, so the guest's `host(i)` is a one-line shim over it.
      context.global.setSync(`__ref_${name}`, new ivm.Reference(fn));
      context.evalSync(
        `globalThis.${name} = ((ref) => (...args) => ref.apply(undefined, args, { arguments: { copy: true }, result: { promise: true, copy: true } }))(__ref_${name}); delete globalThis.__ref_${name};`,
      );
    }
    return {
      evalSync: (code) => context.evalSync(code, { copy: true }),
      evalAsync: (code) => context.eval(code, { promise: true, copy: true }),
      setString(name, value) {
        context.global.setSync(name, value);
      },
      async spin(code, ms) {
        try {
          await context.eval(code, { timeout: ms });
        } catch {
          return;
        }
        throw new Error("spin loop ended without a timeout");
      },
      dispose() {
        context.release();
        isolate.dispose();
      },
    };
  },
};
