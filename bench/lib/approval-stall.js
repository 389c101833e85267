// Hostile-case rows for human review of calls from code (issue 27.5): the longest event-loop gap
// while (a) an eval of `1 + 1` runs with a reviewed tool in reach on a 200,000-row state (the eval
// takes its start snapshot for a possible pause), and (b) an eval pauses for review, then resumes,
// with a journal of about 50 MB (500 completed calls of 100 KB each before the pause). Each runs
// through a real agent with LangGraph's MemorySaver and an InMemoryStore, as a user's would; the
// control row is the same `1 + 1` without a reviewed tool in reach (no start snapshot), so the
// difference between the first two rows is the approval layer's. Target: ≤ 20 ms.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const MiB = 1024 * 1024;
const ROWS = 200_000;
const JOURNAL_CALLS = 500;
const RESULT_CHARS = 100 * 1024;

/** The cases, as `[title, prepare]`: `prepare` (awaited, not measured) returns the measured work. */
export function approvalStallCases(root) {
  const requireFromRoot = createRequire(`${root}package.json`);
  const load = (name) => import(pathToFileURL(requireFromRoot.resolve(name)).href);
  const deps = Promise.all([
    import(pathToFileURL(`${root}dist/langchain/index.js`).href),
    import(pathToFileURL(`${root}dist/langchain/testing/scripted-model.js`).href),
    load("langchain"),
    load("@langchain/langgraph"),
    load("@langchain/core/tools"),
    load("@langchain/core/messages"),
  ]);
  let thread = 0;

  /** An agent whose model calls the eval tool with `codes` in turn, one per invoke; send_email is reviewed unless `reviewed` is false. */
  async function reviewedAgent(codes, reviewed = true) {
    const [lc, scripted, { createAgent }, { InMemoryStore, MemorySaver }, { tool }] = await deps;
    const sendEmail = tool(async ({ to }) => `sent to ${to}`, {
      name: "send_email",
      description: "Sends an email.",
      schema: { type: "object", properties: { to: { type: "string" } } },
    });
    const fetchPage = tool(async ({ n }) => `${n}`.padEnd(RESULT_CHARS, "."), {
      name: "fetch_page",
      description: "Fetches a page.",
      schema: { type: "object", properties: { n: { type: "number" } } },
    });
    const middleware = lc.createCodeInterpreterMiddleware({
      ptc: [sendEmail, fetchPage],
      interruptOn: reviewed ? { send_email: true } : { delete_file: true },
      memoryLimitBytes: 256 * MiB,
      maxSnapshotBytes: 128 * MiB,
      executionTimeoutMs: 30_000,
      wallTimeoutMs: 60_000,
      maxPtcCalls: JOURNAL_CALLS + 1,
    });
    const script = codes.flatMap((code, i) => [
      scripted.callTool("eval", { code }, `eval-${i}`),
      scripted.reply("done"),
    ]);
    const agent = createAgent({
      model: new scripted.ScriptedChatModel(script),
      tools: [sendEmail, fetchPage],
      middleware: [middleware],
      checkpointer: new MemorySaver(),
      store: new InMemoryStore(),
    });
    const config = { configurable: { thread_id: `approval-stall-${thread++}` }, recursionLimit: 50 };
    return { agent, config, middleware };
  }

  const outcomeOf = (result) => {
    const last = result.messages.filter((m) => m.getType() === "tool").at(-1);
    return result.__interrupt__ !== undefined
      ? "paused for review"
      : String(last?.content ?? "")
          .split("\n")
          .slice(0, 2)
          .join(" ");
  };

  return [
    ...[true, false].map((reviewed) => [
      `eval of 1 + 1 ${reviewed ? "with a reviewed tool in reach" : "without one (control)"}, ${ROWS.toLocaleString("en-US")}-row state`,
      async () => {
        const [, , , , , { HumanMessage }] = await deps;
        const rows = `globalThis.rows = Array.from({ length: ${ROWS} }, (_, i) => ({ id: i, name: "row " + i, done: i % 2 === 0 })); rows.length`;
        const { agent, config, middleware } = await reviewedAgent([rows, "1 + 1"], reviewed);
        await agent.invoke({ messages: [new HumanMessage("fill")] }, config);
        return async () => {
          try {
            return outcomeOf(await agent.invoke({ messages: [new HumanMessage("add")] }, config));
          } finally {
            middleware.dispose();
          }
        };
      },
    ]),
    ...["pause", "resume"].map((phase) => [
      `${phase} of a reviewed eval with a ${Math.round((JOURNAL_CALLS * RESULT_CHARS) / MiB)} MB journal`,
      async () => {
        const [, , , { Command }, , { HumanMessage }] = await deps;
        const code = `
let total = 0;
for (let i = 0; i < ${JOURNAL_CALLS}; i++) total += (await tools.fetchPage({ n: i })).length;
await tools.sendEmail({ to: "a@example.com" });
total`;
        const { agent, config, middleware } = await reviewedAgent([code]);
        const pause = () => agent.invoke({ messages: [new HumanMessage("go")] }, config);
        const resume = () => agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
        if (phase === "resume") await pause();
        return async () => {
          try {
            return outcomeOf(await (phase === "pause" ? pause() : resume()));
          } finally {
            middleware.dispose();
          }
        };
      },
    ]),
  ];
}
