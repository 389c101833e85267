// A middleware made by a test is disposed after that test, so no session outlives it.
import { afterEach } from "vitest";
import {
  createCodeInterpreterMiddleware,
  type CodeInterpreterMiddleware,
  type CodeInterpreterMiddlewareOptions,
} from "../../../src/langchain/index.js";

const live: CodeInterpreterMiddleware[] = [];
afterEach(() => {
  for (const m of live.splice(0)) m.dispose();
});

/** `createCodeInterpreterMiddleware(options)`, disposed after the current test. */
export function trackedMiddleware(options: CodeInterpreterMiddlewareOptions = {}): CodeInterpreterMiddleware {
  const m = createCodeInterpreterMiddleware(options);
  live.push(m);
  return m;
}
