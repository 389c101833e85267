/**
 * Worker-thread entry of {@link transformOffThread}, in two roles:
 * - the **parser** transforms one eval's source per message, so parsing and type stripping of large
 *   code never run on the Node main thread;
 * - the **host**, the one worker the main thread starts, keeps a parser running and relays to it.
 *   A parser stuck past an eval's time limit is terminated and replaced here, on the host's
 *   thread: starting a worker costs the thread that starts it milliseconds (tens on a loaded
 *   machine), which the main thread, serving every session, must not pay on a restart.
 *
 * The reply carries only what the eval runs with, since the main thread decodes every object of it:
 * the script as its UTF-8 bytes, how it was made, and its line table, the bytes and the table in
 * transferred buffers. A script of megabytes as a string cost the main thread its decoding from the
 * message and its conversion to UTF-8 for the engine, each milliseconds. Per-declaration names
 * (tens of thousands of strings for a megabyte of declarations) stay here.
 */
import { parentPort, Worker, workerData } from "node:worker_threads";
import { type TransformResult, transformCodeLazily } from "./transform-javascript.js";

/** A request: the source of one eval. */
export interface TransformRequest {
  id: number;
  source: string;
}

/** What the main thread sends the host: a request, or the order to replace a stuck parser. */
export type HostRequest = TransformRequest | { restart: true };

/** What an eval runs with of a transform result: its script as a string, or as UTF-8 bytes from a worker. */
export type RunnableTransform = Pick<TransformResult, "language" | "stripping" | "syntaxError" | "lineMap"> & {
  code: string | Uint8Array;
};

/**
 * The reply: the runnable part of the transform result, its script as UTF-8 bytes and its line
 * table (see `TransformResult.lineTable`) as a typed array.
 */
export interface TransformReply {
  id: number;
  result?: Omit<RunnableTransform, "lineMap" | "code"> & { code: Uint8Array; lineTable?: Uint32Array };
  error?: string;
}

/** What the host sends the main thread: a parser's reply, or that the parser stopped (its requests are lost; a new one runs). */
export type HostReply = TransformReply | { lost: string };

/** The role a worker of this module is started in (`workerData`); a worker started without one parses. */
export interface TransformWorkerData {
  role: "host" | "parser";
}

/** Heap of a parser: TypeScript's parser on code at the size cap needs well under this. */
const PARSER_HEAP_MB = 512;

function transferOf(reply: TransformReply): ArrayBuffer[] {
  if (reply.result === undefined) return [];
  const { code, lineTable } = reply.result;
  return [code.buffer as ArrayBuffer, ...(lineTable === undefined ? [] : [lineTable.buffer as ArrayBuffer])];
}

function runParser(): void {
  const utf8 = new TextEncoder();
  parentPort?.on("message", async ({ id, source }: TransformRequest) => {
    let reply: TransformReply;
    try {
      const { code, language, stripping, syntaxError, lineTable } = await transformCodeLazily(source);
      const table = lineTable === undefined ? undefined : Uint32Array.from(lineTable);
      reply = {
        id,
        result: {
          // A buffer of its own (TextEncoder's), so transferring it moves nothing else.
          code: utf8.encode(code),
          language,
          ...(stripping === undefined ? {} : { stripping }),
          ...(syntaxError === undefined ? {} : { syntaxError }),
          ...(table === undefined ? {} : { lineTable: table }),
        },
      };
    } catch (error) {
      reply = { id, error: error instanceof Error ? error.message : String(error) };
    }
    parentPort?.postMessage(reply, transferOf(reply));
  });
}

function runHost(): void {
  let parser: Worker;
  const start = (): void => {
    const started = new Worker(new URL(import.meta.url), {
      workerData: { role: "parser" } satisfies TransformWorkerData,
      resourceLimits: { maxOldGenerationSizeMb: PARSER_HEAP_MB },
    });
    started.on("message", (reply: TransformReply) => parentPort?.postMessage(reply, transferOf(reply)));
    // A parser that stops by itself (out of memory) loses what it was given; the main thread is told.
    const lost = (why: string): void => {
      if (parser !== started) return;
      parentPort?.postMessage({ lost: why } satisfies HostReply);
      start();
    };
    started.on("error", (error) => lost(error.message));
    started.on("exit", () => lost("the parser stopped"));
    parser = started;
  };
  start();
  parentPort?.on("message", (request: HostRequest) => {
    if (!("restart" in request)) {
      parser.postMessage(request);
      return;
    }
    const stuck = parser;
    start();
    void stuck.terminate();
  });
}

if ((workerData as TransformWorkerData | undefined)?.role === "host") runHost();
else runParser();
