#!/usr/bin/env node
// Case "durable evals" (quickjs-native only): what journaling an eval's host calls as they complete
// costs (`durableEvals`, on by default with a checkpointer), on SQLite and, when a URL is given,
// PostgreSQL. Usage: `npm run build:ts && node bench/durable-evals.js [--runs=5] [--postgres=URL]
// [--layouts=sqlite,postgres] [--embedded]` (the URL may come from QJSN_POSTGRES_URL;
// `bash scripts/with-postgres.sh node bench/durable-evals.js` starts a throwaway cluster). Prints
// Markdown on stdout; `--embedded` leaves out the heading (bench/run.js adds its own).
//
// Three figures per layout, each a median over --runs:
// 1. one eval making 100 sequential calls to a 1 ms tool, the agent run timed end to end, with
//    the journal and with `durableEvals: false` on the same checkpointer, runs alternating (ABAB);
// 2. resuming an eval stopped right after call 900 of 1,000: a fresh middleware and agent on the
//    same checkpointer (as another process would be, modules already loaded) from
//    `agent.invoke(null, config)` until call 901 starts. The stop is a drain with no time left,
//    which leaves the checkpointer as a SIGKILL right after call 900 is journaled does;
// 3. bytes handed to the checkpointer per journaled call (base64 batch pieces, one call per batch)
//    when each call returns a 200-character string, the head with the start snapshot left out.
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createAgent, tool } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { z } from "zod";
import { createCodeInterpreterMiddleware } from "../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../dist/langchain/testing/scripted-model.js";

const args = process.argv.slice(2);
const arg = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const runs = Number(arg("runs") ?? 5);
const postgres = arg("postgres") ?? process.env.QJSN_POSTGRES_URL;
const only = arg("layouts")?.split(",");

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function openSaver(kind, where) {
  if (kind === "postgres") {
    const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
    const saver = PostgresSaver.fromConnString(where);
    await saver.setup();
    return saver;
  }
  const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
  return SqliteSaver.fromConnString(where);
}

/** `saver`, counting the characters of journal batches handed to it (heads left out). */
function counting(saver) {
  const counted = { chars: 0, batches: 0 };
  const putWrites = saver.putWrites.bind(saver);
  saver.putWrites = (config, writes, taskId) => {
    if (taskId.startsWith("code-interpreter-journal:") && !taskId.endsWith(":head")) {
      counted.batches++;
      for (const [, value] of writes) counted.chars += typeof value === "string" ? value.length : 0;
    }
    return putWrites(config, writes, taskId);
  };
  return counted;
}

let threads = 0;

/**
 * One agent on `saver` whose eval makes `calls` sequential calls to `step` (each `waitMs`, result
 * `resultChars` long); `onCall(n)` sees each call first. `resume`: the agent only replies.
 */
function agentOn(saver, { calls, waitMs = 0, resultChars = 0, durable = true, resume = false, onCall }) {
  const step = tool(
    async ({ n }) => {
      onCall?.(n);
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      return "r".repeat(resultChars);
    },
    { name: "step", description: "One step.", schema: z.object({ n: z.number() }) },
  );
  const interpreter = createCodeInterpreterMiddleware({ ptc: [step], maxPtcCalls: null, durableEvals: durable });
  const code = `let last; for (let n = 1; n <= ${calls}; n++) last = await tools.step({ n }); last.length`;
  const model = new ScriptedChatModel(resume ? [reply("done")] : [callTool("eval", { code }, "eval-1"), reply("done")]);
  return { interpreter, agent: createAgent({ model, tools: [step], middleware: [interpreter], checkpointer: saver }) };
}

/** Median ms of one 100-call eval's agent run, with and without the journal, alternating. */
async function sequentialCost(saver) {
  const times = { on: [], off: [] };
  for (let i = 0; i < runs * 2; i++) {
    const durable = i % 2 === 0;
    const { agent, interpreter } = agentOn(saver, { calls: 100, waitMs: 1, durable });
    const config = { configurable: { thread_id: `seq-${process.pid}-${++threads}` } };
    const t0 = performance.now();
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    times[durable ? "on" : "off"].push(performance.now() - t0);
    interpreter.dispose();
  }
  return { on: median(times.on), off: median(times.off) };
}

/** Median ms from `agent.invoke(null)` to call 901 of an eval stopped after call 900 of 1,000. */
async function resumeCost(saver) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const config = { configurable: { thread_id: `resume-${process.pid}-${++threads}` } };
    let drained;
    const first = agentOn(saver, {
      calls: 1000,
      onCall: (n) => {
        if (n === 900) drained = first.interpreter.drain({ deadlineMs: 0 });
      },
    });
    void first.agent.invoke({ messages: [new HumanMessage("go")] }, config).catch(() => {});
    while (drained === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
    await drained;
    let reached;
    const at901 = new Promise((resolve) => (reached = resolve));
    const second = agentOn(saver, {
      calls: 1000,
      resume: true,
      onCall: (n) => n === 901 && reached(performance.now()),
    });
    const t0 = performance.now();
    const done = second.agent.invoke(null, config);
    times.push((await at901) - t0);
    await done;
    second.interpreter.dispose();
  }
  // The drained middlewares are never disposed: their evals would end, and be recorded, once their sandboxes are gone.
  return median(times);
}

/** Characters handed to the checkpointer per journaled call returning a 200-character string. */
async function bytesPerCall(saver) {
  const counted = counting(saver);
  const { agent, interpreter } = agentOn(saver, { calls: 50, resultChars: 200 });
  await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: `bytes-${++threads}` } });
  interpreter.dispose();
  return { perCall: counted.chars / 50, batches: counted.batches };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "qjsn-durable-bench-"));
  const layouts = [
    { kind: "sqlite", title: "SQLite checkpointer", where: join(dir, "durable.sqlite") },
    ...(postgres ? [{ kind: "postgres", title: "PostgreSQL checkpointer", where: postgres }] : []),
  ].filter((layout) => only === undefined || only.includes(layout.kind));
  const out = [
    ...(args.includes("--embedded") ? [] : ["## durable evals", ""]),
    `Load average at start: ${loadavg()[0].toFixed(2)} (1 min); medians of ${runs} runs.`,
    "",
  ];
  if (!postgres)
    out.push(
      "PostgreSQL: skipped (pass --postgres=URL, set QJSN_POSTGRES_URL, or run under scripts/with-postgres.sh).",
      "",
    );
  out.push(
    "| checkpointer | 100 sequential 1 ms calls, journaled | not journaled | ratio (target ≤ 1.10) | resume after call 900 of 1,000 → call 901 (target ≤ 250 ms) | bytes per journaled call (200-char result) |",
    "|---|---|---|---|---|---|",
  );
  try {
    for (const layout of layouts) {
      process.stderr.write(`durable evals: ${layout.title}\n`);
      const saver = await openSaver(layout.kind, layout.where);
      const seq = await sequentialCost(saver);
      const resume = await resumeCost(saver);
      const bytes = await bytesPerCall(saver);
      out.push(
        `| ${layout.title} | ${seq.on.toFixed(1)} ms | ${seq.off.toFixed(1)} ms | ${(seq.on / seq.off).toFixed(3)} | ${resume.toFixed(1)} ms | ${bytes.perCall.toFixed(0)} (${bytes.batches} batches for 50 calls) |`,
      );
      await saver.end?.();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${out.join("\n")}\n`);
  // The drained evals never settle: the process ends here, as a drained server exits.
  process.exit(0);
}

await main();
