/**
 * Model-written code transformed off the Node main thread. Parsing grows with the code (hundreds
 * of ms for a few hundred KB of TypeScript) and the main thread serves every session, so code past
 * a few KB goes to a worker thread, reused across evals, with a time limit. Short code, the
 * usual case, is transformed inline: a worker round trip would cost more than parsing it. The
 * worker started here hosts the parser in a worker of its own and replaces it when it is stuck
 * (transform-worker.ts), so a restart starts no worker on the main thread.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { failedParse, lineMapOf, transformCodeLazily } from "./transform-javascript.js";
import type { HostReply, HostRequest, RunnableTransform, TransformWorkerData } from "./transform-worker.js";

/** Code up to this many characters is transformed inline (well under a millisecond of parsing). */
export const INLINE_TRANSFORM_CHARS = 4096;

const WORKER_URL = new URL("./transform-worker.js", import.meta.url);
// The worker runs the compiled module; run from TypeScript sources (as under vitest), there is none
// and every transform runs inline.
const workerAvailable = existsSync(fileURLToPath(WORKER_URL));

interface Pending {
  resolve: (result: RunnableTransform) => void;
  timer: NodeJS.Timeout;
}

let worker: Worker | undefined;
const pending = new Map<number, Pending>();
let nextId = 1;

function failAll(message: string): void {
  for (const [id, entry] of pending) {
    clearTimeout(entry.timer);
    entry.resolve(failedParse(message, 1, 1, "javascript"));
    pending.delete(id);
  }
}

function stopWorker(message: string): void {
  const current = worker;
  worker = undefined;
  failAll(message);
  void current?.terminate();
}

function ensureWorker(): Worker {
  if (worker !== undefined) return worker;
  // The host worker runs the parser in a worker of its own and replaces it when it is stuck.
  const created = new Worker(WORKER_URL, { workerData: { role: "host" } satisfies TransformWorkerData });
  created.on("message", (reply: HostReply) => {
    if ("lost" in reply) {
      failAll(`the code could not be parsed: ${reply.lost}`);
      return;
    }
    const { id, result, error } = reply;
    const entry = pending.get(id);
    if (entry === undefined) return;
    pending.delete(id);
    clearTimeout(entry.timer);
    if (pending.size === 0) created.unref();
    if (result === undefined)
      entry.resolve(failedParse(`the code could not be parsed: ${error ?? "unknown failure"}`, 1, 1, "javascript"));
    else {
      const { lineTable, ...runnable } = result;
      entry.resolve(lineTable === undefined ? runnable : { ...runnable, lineMap: lineMapOf(lineTable) });
    }
  });
  created.on("error", (error) => {
    if (worker === created) stopWorker(`the code could not be parsed: ${error.message}`);
  });
  created.on("exit", () => {
    if (worker === created) stopWorker("the code could not be parsed: the parser stopped");
  });
  worker = created;
  return created;
}

/**
 * Transforms one eval's source (see {@link transformCodeLazily}) without blocking the main thread for
 * long: inline up to {@link INLINE_TRANSFORM_CHARS}, else on the worker. A transform that takes
 * longer than `timeoutMs` is stopped (the worker is replaced) and the code fails with a
 * `SyntaxError` saying so. Never rejects. Code transformed on the worker comes back as its UTF-8
 * bytes, which the sandbox takes as they are.
 */
export function transformOffThread(source: string, timeoutMs: number): Promise<RunnableTransform> {
  if (source.length <= INLINE_TRANSFORM_CHARS || !workerAvailable) return transformCodeLazily(source);
  return new Promise((resolve) => {
    const id = nextId++;
    const target = ensureWorker();
    const timer = setTimeout(() => {
      pending.delete(id);
      resolve(failedParse(`the code took longer than ${timeoutMs} ms to parse`, 1, 1, "javascript"));
      // The parser is stuck on this code: evals queued behind it are told to run again, and the
      // host worker replaces the parser (starting a worker here would hold the main thread).
      if (worker !== target) return;
      failAll("the code parser was restarted; run the code again");
      target.postMessage({ restart: true } satisfies HostRequest);
      target.unref();
    }, timeoutMs);
    pending.set(id, { resolve, timer });
    target.ref();
    target.postMessage({ id, source } satisfies HostRequest);
  });
}
