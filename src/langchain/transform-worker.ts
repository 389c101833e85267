/**
 * Worker-thread entry of {@link transformOffThread}: transforms one eval's source per message, so
 * parsing and type stripping of large code never run on the Node main thread.
 *
 * The reply carries only what the eval runs with, since the main thread decodes every object of it:
 * the script, how it was made, and its line table as one transferred typed array. Per-declaration
 * names (tens of thousands of strings for a megabyte of declarations) stay here.
 */
import { parentPort } from "node:worker_threads";
import { type TransformResult, transformCodeLazily } from "./transform-javascript.js";

/** A request: the source of one eval. */
export interface TransformRequest {
  id: number;
  source: string;
}

/** What an eval runs with of a transform result. */
export type RunnableTransform = Pick<TransformResult, "code" | "language" | "stripping" | "syntaxError" | "lineMap">;

/** The reply: the runnable part of the transform result, its line table (see `TransformResult.lineTable`) as a typed array. */
export interface TransformReply {
  id: number;
  result?: Omit<RunnableTransform, "lineMap"> & { lineTable?: Uint32Array };
  error?: string;
}

parentPort?.on("message", async ({ id, source }: TransformRequest) => {
  let reply: TransformReply;
  const transfer: ArrayBuffer[] = [];
  try {
    const { code, language, stripping, syntaxError, lineTable } = await transformCodeLazily(source);
    const table = lineTable === undefined ? undefined : Uint32Array.from(lineTable);
    if (table !== undefined) transfer.push(table.buffer);
    reply = { id, result: { code, language, ...(stripping === undefined ? {} : { stripping }), ...(syntaxError === undefined ? {} : { syntaxError }), ...(table === undefined ? {} : { lineTable: table }) } };
  } catch (error) {
    reply = { id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(reply, transfer);
});
