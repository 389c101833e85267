#!/usr/bin/env node
// Standalone case "resume replay" (quickjs-native only): what resuming an eval paused for human
// review (`interruptOn`) costs as a function of the host calls journaled before the pause.
// Usage: `npm run build:ts && node bench/resume-replay.js [--runs=5]`. Uses the package's dist/ and
// the root node_modules (langchain, @langchain/langgraph); prints a Markdown table on stdout.
//
// One agent per measurement (scripted model, LangGraph's MemorySaver, createAgent): the eval calls
// `tools.lookup` N times, then `tools.sendEmail`, which pauses. Timed: the resume
// (`agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }))`), i.e. loading and
// checking the journal, restoring the start snapshot, replaying N calls from the journal, sending
// the email and formatting the result, plus LangGraph's own resume and the scripted final reply.
// The resume runs in a second middleware sharing the checkpointer, as another process would: in the
// process where it paused, the paused eval is kept alive and a resume replays nothing.
import { performance } from "node:perf_hooks";
import { createAgent, tool } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { createCodeInterpreterMiddleware } from "../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../dist/langchain/testing/scripted-model.js";

const runs = Number(process.argv.find((a) => a.startsWith("--runs="))?.slice(7) ?? 5);
const SIZES = [0, 10, 100, 1000];

const lookup = tool(async ({ name }) => ({ email: `${name}@example.com`, score: name.length }), {
  name: "lookup",
  description: "Finds a person.",
  schema: z.object({ name: z.string() }),
});
let sent = 0;
const sendEmail = tool(
  async ({ to }) => {
    sent++;
    return `sent to ${to}`;
  },
  {
    name: "send_email",
    description: "Sends an email.",
    schema: z.object({ to: z.string(), body: z.string() }),
  },
);

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function measure(n, thread) {
  const code = `let last; for (let i = 0; i < ${n}; i++) last = await tools.lookup({ name: "u" + i }); await tools.sendEmail({ to: "a@example.com", body: String(last?.score) })`;
  const checkpointer = new MemorySaver();
  const agentOf = (script) => {
    const interpreter = createCodeInterpreterMiddleware({
      ptc: [lookup, sendEmail],
      interruptOn: { send_email: true },
      maxPtcCalls: null,
    });
    return {
      interpreter,
      agent: createAgent({
        model: new ScriptedChatModel(script),
        tools: [lookup, sendEmail],
        middleware: [interpreter],
        checkpointer,
      }),
    };
  };
  const { agent, interpreter } = agentOf([callTool("eval", { code }, "eval-1")]);
  const elsewhere = agentOf([reply("done")]);
  const config = { configurable: { thread_id: thread } };
  let t = performance.now();
  const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
  const firstMs = performance.now() - t;
  if (first.__interrupt__ === undefined) throw new Error("the eval did not pause");
  const before = sent;
  t = performance.now();
  await elsewhere.agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
  const resumeMs = performance.now() - t;
  if (sent !== before + 1) throw new Error("the email was not sent exactly once");
  interpreter.dispose();
  elsewhere.interpreter.dispose();
  return { firstMs, resumeMs };
}

// Sizes interleaved round by round, after a discarded warm-up round, so load spikes and JIT warm-up
// spread over all sizes instead of landing on one.
const samples = new Map(SIZES.map((n) => [n, { firsts: [], resumes: [] }]));
for (let r = -1; r < runs; r++) {
  for (const n of SIZES) {
    const { firstMs, resumeMs } = await measure(n, `n${n}-r${r}`);
    if (r < 0) continue;
    samples.get(n).firsts.push(firstMs);
    samples.get(n).resumes.push(resumeMs);
  }
}
const rows = SIZES.map((n) => ({ n, first: median(samples.get(n).firsts), resume: median(samples.get(n).resumes) }));
const base = rows[0].resume;
console.log(
  `| journaled calls | first run, to the pause (ms) | resume (ms) | resume − resume at 0 calls, per call (µs) |`,
);
console.log(`|---|---|---|---|`);
for (const { n, first, resume } of rows) {
  console.log(
    `| ${n} | ${first.toFixed(1)} | ${resume.toFixed(1)} | ${n === 0 ? "—" : (((resume - base) * 1000) / n).toFixed(0)} |`,
  );
}
console.log(`\nmedians of ${runs} runs; node ${process.version}`);
