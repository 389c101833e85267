// The fake LangChain tool both eval-tool middlewares expose to guest code in case (i): a
// lookup that does no I/O, so the measurement is the middleware and engine path alone.
import { AIMessage, SystemMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";

/** A fresh `lookup` tool returning a small JSON record as text (what real tools mostly return). */
export function makeLookupTool() {
  return tool(async ({ id }) => JSON.stringify({ id, name: `item-${id}` }), {
    name: "lookup",
    description: "Look up an item by id.",
    schema: z.object({ id: z.number() }),
  });
}

/** What the guest program of case (i) evaluates to. */
export const LOOKUP_RESULT = "item-7";

/**
 * Both middlewares learn the agent's tools (and so the PTC tools) when the agent calls the
 * model; do that once, as an agent's first model call would, before timing tool calls.
 */
export async function resolvePtcTools(middleware, tools, config) {
  if (!middleware.wrapModelCall) return;
  await middleware.wrapModelCall(
    { tools, systemMessage: new SystemMessage("bench"), runtime: config, messages: [] },
    async () => new AIMessage("ok"),
  );
}
