/**
 * Worker-thread entry of {@link transformOffThread}: transforms one eval's source per message, so
 * parsing and type stripping of large code never run on the Node main thread.
 */
import { parentPort } from "node:worker_threads";
import { type TransformResult, transformCodeLazily } from "./transform-javascript.js";

/** A request: the source of one eval. */
export interface TransformRequest {
  id: number;
  source: string;
}

/** The reply: the transform result (its `lineMap` function stays behind; `lineTable` carries it). */
export interface TransformReply {
  id: number;
  result?: Omit<TransformResult, "lineMap">;
  error?: string;
}

parentPort?.on("message", async ({ id, source }: TransformRequest) => {
  let reply: TransformReply;
  try {
    const { lineMap: _lineMap, ...result } = await transformCodeLazily(source);
    reply = { id, result };
  } catch (error) {
    reply = { id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(reply);
});
