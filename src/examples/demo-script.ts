/**
 * The demo's embedded chat model: a deterministic script standing in for an LLM, so the demo
 * runs with no API key and no network. It plays what a capable model does with a code
 * interpreter and programmatic tool calling: one program that fetches every page, filters and
 * aggregates inside the sandbox, then a short answer written from the program's final value.
 */
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import { ScriptedChatModel, callTool } from "../langchain/testing/scripted-model.js";

/** The user's question. */
export const QUESTION =
  "Across all regions, which three products brought in the most revenue from delivered Q3 orders? Give the revenue of each.";

/** The one program the scripted model writes: every tool call happens in here, in the sandbox. */
export const PROGRAM = `const regions = await tools.listRegions({});

async function allOrders(region) {
  const orders = [];
  for (let page = 1; page !== null; ) {
    const res = await tools.fetchOrders({ region, page });
    orders.push(...res.orders);
    page = res.nextPage;
  }
  return orders;
}

const orders = (await Promise.all(regions.map(allOrders))).flat();
const delivered = orders.filter((o) => o.status === "delivered");
const revenue = {};
for (const o of delivered) revenue[o.product] = (revenue[o.product] ?? 0) + o.quantity * o.unitPrice;

const top = Object.entries(revenue)
  .sort((a, b) => b[1] - a[1])
  .slice(0, 3)
  .map(([product, total]) => ({ product, revenue: Math.round(total * 100) / 100 }));
({ ordersScanned: orders.length, delivered: delivered.length, top });`;

/** Reads `{ product: '…', revenue: 123.4 }` entries back out of the eval result the model saw. */
function answerFrom(messages: readonly BaseMessage[]): AIMessage {
  const last = messages.at(-1);
  const text = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "");
  const rows = [...text.matchAll(/product: '([^']+)',\s*revenue: ([\d.]+)/g)];
  if (rows.length === 0) return new AIMessage(`The program did not return a ranking; it reported:\n${text}`);
  const money = (n: string): string =>
    `$${Number(n).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  const list = rows.map(([, product, revenue], i) => `${i + 1}. ${product}: ${money(revenue!)}`).join("\n");
  const scanned = /ordersScanned: (\d+)/.exec(text)?.[1];
  return new AIMessage(`Top products by delivered Q3 revenue${scanned ? ` (from ${scanned} orders)` : ""}:\n${list}`);
}

/** A fresh scripted model: one eval call with {@link PROGRAM}, then the answer. */
export function scriptedModel(): ScriptedChatModel {
  return new ScriptedChatModel([callTool("eval", { code: PROGRAM }), answerFrom]);
}
