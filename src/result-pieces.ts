/**
 * The pieces of a string result decoded in chunks, by report. V8 joins the pieces of such a string
 * lazily (a rope): any read of the string itself (a `slice`, a regexp) first copies all of it into
 * one flat string, in one go on the calling thread. A caller that shows only the head and tail of
 * a string of megabytes takes them from its pieces.
 */
import type { EvalReport } from "./types.js";

const piecesOfResults = new WeakMap<EvalReport, readonly string[]>();

/**
 * The flat strings whose concatenation is `report.value`, when that is a string decoded in chunks
 * (one of more than 256 KiB); `undefined` otherwise. Reading them copies nothing.
 */
export function resultPiecesOf(report: EvalReport): readonly string[] | undefined {
  return piecesOfResults.get(report);
}

/** Records the pieces `report.value` was decoded as (see {@link resultPiecesOf}). */
export function recordResultPieces(report: EvalReport, pieces: readonly string[]): void {
  piecesOfResults.set(report, pieces);
}
