#!/usr/bin/env node
// Bench case "thread storage" (quickjs-native only, runnable alone):
//   node bench/thread-storage.js [--postgres=URL] [--runs=N] [--layouts=sqlite,sqlite-inline,postgres,postgres-inline] [--embedded]
// (the URL may also come from QJSN_POSTGRES_URL; `bash scripts/with-postgres.sh node bench/thread-storage.js`
// runs it against a throwaway cluster). Needs the package built (`npm run build`) and the root
// devDependencies (the SQLite and Postgres checkpointers), not bench/node_modules.
//
// Scenario (issue 18): one thread, mode "thread", a signed snapshot, seven agent runs of one eval
// each: (1) creates rows = 10,000 records, (2) a read-only reduce, (3) changes one row, then
// (4..7) alternate read-only and one-row turns. After each run it sums the bytes the checkpointer
// and the store hold for the thread (SQLite: length of every stored blob; Postgres: octet length
// of every JSONB and BYTEA value), for four layouts: store chunks on SQLite (SqliteSaver +
// SqliteStore), no store on SQLite (the chunks in private checkpoints of the thread, a reference in
// graph state), and the same two on Postgres.
//
// Restore: a fresh Node process opens the checkpointer and store and serves another thread for
// four runs (a process's first runs cost far more CPU than later ones: first use, JIT; later runs
// also load the checkpointer's message deserializer), then runs one eval on the stored thread four
// times: the first run restores it, the next three find it live. Inside the first run it times
// the restore's own work where the middleware does it: the store read (started by beforeAgent,
// beside the model call) and the restore the first eval waits for (Sandbox.restoreAsync: the
// signature check on the main thread, the body read on an executor thread); beside it, the
// checkpointer read every run pays. End to end, the first run's wall and CPU time minus the median
// of the next three (a single second run is a poor baseline: the garbage the first leaves is
// collected in it), noisy on a loaded machine. Medians of --runs processes. `--embedded` leaves
// out the top heading (bench/run.js puts the output in RESULTS.md).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const args = process.argv.slice(2);
const arg = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const KEY = "bench-signing-key-0123456789";
const STATE_KEY = "_codeInterpreterSnapshot";
/** Namespace prefix of the private checkpoints holding a thread's chunks when the agent has no store. */
const BLOBS_NS = "__quickjs_native_blobs__";
const ROWS = `var rows = Array.from({ length: 10000 }, (_, i) => ({ id: i, name: "row-" + i, v: i * 2 })); rows.length`;
const SMALL = `var config = { region: "north", limit: 10 }; function score(r) { return r.v * 2; } config.limit`;
const READ = (i) => `rows.reduce((sum, r) => sum + r.v, 0) + ${i}`;
const CHANGE = (i) =>
  `rows[${1000 * i}] = { id: ${1000 * i}, name: "changed-" + ${i}, v: -${i} }; rows[${1000 * i}].name`;
const TURNS = [
  ["first (creates the rows)", ROWS],
  ["read-only", READ(2)],
  ["one-row change", CHANGE(3)],
  ["read-only", READ(4)],
  ["one-row change", CHANGE(5)],
  ["read-only", READ(6)],
  ["one-row change", CHANGE(7)],
];

async function importRoot(specifier) {
  return import(new URL(specifier, `file://${root}`).href);
}

/** The checkpointer, store and byte counter of one layout. */
async function openBackend(kind, where) {
  const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
  if (kind.startsWith("postgres")) {
    const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
    const { PostgresStore } = await import("@langchain/langgraph-checkpoint-postgres/store");
    const pg = (await import("pg")).default;
    const checkpointer = PostgresSaver.fromConnString(where);
    await checkpointer.setup();
    const store = kind === "postgres" ? PostgresStore.fromConnString(where) : undefined;
    await store?.setup();
    const pool = new pg.Pool({ connectionString: where, max: 1 });
    const one = async (sql, params) => Number((await pool.query(sql, params)).rows[0].n ?? 0);
    return {
      checkpointer,
      store,
      async bytes(thread) {
        // The middleware keys a thread's store namespace by the digest of its session key.
        const digest = createHash("sha256").update(`thread:${thread}`).digest("hex").slice(0, 32);
        const checkpoints =
          (await one(
            "SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text)) AS n FROM checkpoints WHERE thread_id = $1",
            [thread],
          )) +
          (await one("SELECT sum(octet_length(blob)) AS n FROM checkpoint_blobs WHERE thread_id = $1", [thread])) +
          (await one("SELECT sum(octet_length(blob)) AS n FROM checkpoint_writes WHERE thread_id = $1", [thread]));
        const stored = await one("SELECT sum(octet_length(value::text)) AS n FROM store WHERE namespace_path LIKE $1", [
          `%${digest}%`,
        ]);
        // Postgres keeps object-valued channels in checkpoint_blobs, one row per new version.
        // Without a store, the chunks are private checkpoints of the thread (namespace BLOBS_NS*).
        const state =
          (await one(
            "SELECT sum(octet_length(blob)) AS n FROM checkpoint_blobs WHERE thread_id = $1 AND channel = $2",
            [thread, STATE_KEY],
          )) +
          (await one(
            "SELECT sum(octet_length(blob)) AS n FROM checkpoint_writes WHERE thread_id = $1 AND channel = $2",
            [thread, STATE_KEY],
          )) +
          (await one(
            "SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text)) AS n FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns LIKE $2",
            [thread, `${BLOBS_NS}%`],
          ));
        return { checkpoints, state, store: stored };
      },
      async close() {
        await pool.end();
        await checkpointer.end();
        await store?.stop();
      },
    };
  }
  const checkpointer = SqliteSaver.fromConnString(where);
  let store;
  if (kind === "sqlite") {
    const { SqliteStore } = await importRoot("dist/langchain/sqlite-store.js");
    store = new SqliteStore(`${where}.store`);
  }
  const Database = (await import("better-sqlite3")).default;
  return {
    checkpointer,
    store,
    async bytes(thread) {
      const db = new Database(where, { readonly: true });
      const n = (sql) => Number(db.prepare(sql).get(thread)?.n ?? 0);
      const checkpoints =
        n("SELECT sum(length(checkpoint) + length(metadata)) AS n FROM checkpoints WHERE thread_id = ?") +
        n("SELECT sum(length(value)) AS n FROM writes WHERE thread_id = ?");
      // SQLite keeps every channel's value inside every checkpoint: measure the interpreter's key in each.
      let state = Number(
        db
          .prepare("SELECT sum(length(value)) AS n FROM writes WHERE thread_id = ? AND channel = ?")
          .get(thread, STATE_KEY)?.n ?? 0,
      );
      for (const row of db
        .prepare("SELECT checkpoint_ns, checkpoint, metadata FROM checkpoints WHERE thread_id = ?")
        .iterate(thread)) {
        if (row.checkpoint_ns.startsWith(BLOBS_NS)) {
          state += row.checkpoint.length + row.metadata.length; // a chunk kept in the checkpointer (no store)
          continue;
        }
        const value = JSON.parse(Buffer.from(row.checkpoint).toString("utf8")).channel_values?.[STATE_KEY];
        if (value !== undefined) state += Buffer.byteLength(JSON.stringify(value));
      }
      db.close();
      let stored = 0;
      if (store !== undefined) {
        const sdb = new Database(`${where}.store`, { readonly: true });
        stored = Number(sdb.prepare("SELECT sum(length(value)) AS n FROM store").get()?.n ?? 0);
        sdb.close();
      }
      return { checkpoints, state, store: stored };
    },
    async close() {
      store?.close();
    },
  };
}

/** One agent run with one eval on `thread`; returns the eval's text and the run's wall time. */
async function runTurn(agentParts, thread, code, id) {
  const { createAgent } = await import("langchain");
  const { HumanMessage } = await import("@langchain/core/messages");
  const { ScriptedChatModel, callTool, reply } = await importRoot("dist/langchain/testing/scripted-model.js");
  const step = callTool("eval", { code }, `call-${id}`);
  step.id = `eval-${id}`;
  const done = reply("done");
  done.id = `reply-${id}`;
  const agent = createAgent({
    model: new ScriptedChatModel([step, done]),
    tools: [],
    middleware: [agentParts.interpreter],
    checkpointer: agentParts.checkpointer,
    store: agentParts.store,
  });
  const started = performance.now();
  const cpu = process.cpuUsage();
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: thread } });
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const tool = result.messages.filter((m) => m.getType() === "tool").at(-1);
  // CPU time (every thread of the process) next to wall time: on a loaded machine wall time also counts waiting for a core.
  return { text: String(tool.content), ms, cpuMs: (used.user + used.system) / 1000 };
}

async function storageTable(kind, where) {
  const { createCodeInterpreterMiddleware } = await importRoot("dist/langchain/index.js");
  const backend = await openBackend(kind, where);
  const thread = `storage-${process.pid}-${Date.now()}`;
  const interpreter = createCodeInterpreterMiddleware({ snapshotSigningKey: KEY });
  const rows = [];
  let before = { checkpoints: 0, state: 0, store: 0 };
  for (let i = 0; i < TURNS.length; i++) {
    const [what, code] = TURNS[i];
    const { text } = await runTurn({ interpreter, ...backend }, thread, code, `${thread}-${i}`);
    if (/<notice>|<error>/.test(text)) throw new Error(`turn ${i + 1} (${what}) did not run cleanly: ${text}`);
    const after = await backend.bytes(thread);
    rows.push({
      turn: i + 1,
      what,
      checkpoints: after.checkpoints - before.checkpoints,
      state: after.state - before.state,
      store: after.store - before.store,
      ours: after.state + after.store,
      total: after.checkpoints + after.store,
    });
    before = after;
  }
  interpreter.dispose();
  await backend.close();
  return { rows, thread };
}

/** Child mode: one fresh process restoring `thread` (or running on an empty thread for the baseline). */
async function restoreChild(kind, where, thread) {
  const { createCodeInterpreterMiddleware } = await importRoot("dist/langchain/index.js");
  const { ThreadBlobs } = await importRoot("dist/langchain/thread-blobs.js");
  const { Persistence } = await importRoot("dist/langchain/persistence.js");
  const backend = await openBackend(kind, where);
  const interpreter = createCodeInterpreterMiddleware({ snapshotSigningKey: KEY });
  const parts = { interpreter, ...backend };
  // Load and exercise the code paths on a thread of its own, as a server that served others
  // before: a process's first agent runs cost far more CPU than later ones (first use, JIT), and
  // later runs read earlier messages back, which loads the checkpointer's deserializer.
  for (let i = 1; i <= 4; i++)
    await runTurn(parts, `warm-${process.pid}`, i === 1 ? SMALL : "config.limit", `warm-${process.pid}-${i}`);

  const split = {};
  const t = performance.now();
  await backend.checkpointer.getTuple({ configurable: { thread_id: thread } });
  split.checkpointerMs = performance.now() - t;

  // The restore's own work inside the first run, timed where the middleware does it: the store
  // read (started by beforeAgent, beside the model call), the part of it the first eval still
  // waits for (its own `load` call, the last one), and the restore the eval waits for
  // (Sandbox.restoreAsync, then the body digest that spares rewriting an unchanged state).
  const timed = (proto, name, record) => {
    const original = proto[name];
    proto[name] = async function (...args) {
      const started = performance.now();
      const result = await original.apply(this, args);
      record(performance.now() - started, result);
      return result;
    };
  };
  timed(ThreadBlobs.prototype, "read", (ms, bytes) => {
    split.storeMs = ms;
    split.snapshotBytes = bytes.length;
  });
  timed(Persistence.prototype, "load", (ms) => (split.loadWaitMs = ms));
  timed(Persistence.prototype, "restore", (ms) => (split.sandboxRestoreMs = (split.sandboxRestoreMs ?? 0) + ms));

  // End to end: the first agent run on the thread restores it, the next ones find it live. All
  // read the same history and store the same state at the end; the difference is the restore
  // plus noise (a loaded machine makes it noisy).
  const read = "typeof rows === 'object' ? rows.length : Object.keys(config).length";
  const turns = [];
  for (let i = 1; i <= 4; i++) turns.push(await runTurn(parts, thread, read, `restore-${process.pid}-${i}`));
  for (const { text } of turns)
    if (/<notice>|<error>/.test(text)) throw new Error(`restore did not run cleanly: ${text}`);
  interpreter.dispose();
  await backend.close();
  split.storeMs ??= 0; // state kept inline in graph state: no store read
  split.loadWaitMs ??= 0;
  split.restoreMs = split.loadWaitMs + split.sandboxRestoreMs;
  const [first, ...live] = turns;
  process.stdout.write(
    JSON.stringify({
      ms: first.ms - median(live.map((r) => r.ms)),
      cpuMs: first.cpuMs - median(live.map((r) => r.cpuMs)),
      ...split,
    }),
  );
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function restoreTime(kind, where, thread, runs) {
  const child = () => {
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", kind, where, thread], {
      cwd: root,
      encoding: "utf8",
      timeout: 120_000,
    });
    if (r.status !== 0) throw new Error(`restore child failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };
  const restored = [];
  for (let i = 0; i < runs; i++) restored.push(child());
  const field = (name) => median(restored.map((r) => r[name]));
  return {
    restoreMs: field("restoreMs"),
    addedMs: field("ms"),
    addedCpuMs: field("cpuMs"),
    checkpointerMs: field("checkpointerMs"),
    storeMs: field("storeMs"),
    loadWaitMs: field("loadWaitMs"),
    sandboxRestoreMs: field("sandboxRestoreMs"),
    snapshotBytes: field("snapshotBytes"),
  };
}

const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
const ms = (n) => `${n.toFixed(1)} ms`;

async function main() {
  if (args[0] === "--child") return restoreChild(args[1], args[2], args[3]);
  const runs = Number(arg("runs") ?? 5);
  const postgres = arg("postgres") ?? process.env.QJSN_POSTGRES_URL;
  const dir = mkdtempSync(join(tmpdir(), "qjsn-thread-storage-"));
  const only = arg("layouts")?.split(",");
  const layouts = [
    { kind: "sqlite", title: "SQLite checkpointer + SqliteStore (chunks)", where: join(dir, "chunks.sqlite") },
    {
      kind: "sqlite-inline",
      title: "SQLite checkpointer, no store (chunks in the checkpointer)",
      where: join(dir, "inline.sqlite"),
    },
    ...(postgres
      ? [
          { kind: "postgres", title: "PostgreSQL checkpointer + PostgresStore (chunks)", where: postgres },
          {
            kind: "postgres-inline",
            title: "PostgreSQL checkpointer, no store (chunks in the checkpointer)",
            where: postgres,
          },
        ]
      : []),
  ].filter((layout) => only === undefined || only.includes(layout.kind));
  const { loadavg } = await import("node:os");
  const out = [
    ...(args.includes("--embedded") ? [] : [`## thread storage (10,000-row state, signed, one eval per run)`, ""]),
    `Load average at start: ${loadavg()[0].toFixed(2)} (1 min).`,
    "",
  ];
  if (!postgres)
    out.push(
      "PostgreSQL: skipped (pass --postgres=URL, set QJSN_POSTGRES_URL, or run under scripts/with-postgres.sh).",
      "",
    );
  try {
    for (const layout of layouts) {
      process.stderr.write(`thread storage: ${layout.title}\n`);
      const { rows, thread } = await storageTable(layout.kind, layout.where);
      out.push(
        `### ${layout.title}`,
        "",
        "| turn | what | interpreter state added (checkpointer + store) | of it, in the checkpointer | everything added to the checkpointer (with messages) | added to the store | interpreter state, cumulative | everything, cumulative |",
        "|---|---|---|---|---|---|---|---|",
      );
      for (const r of rows)
        out.push(
          `| ${r.turn} | ${r.what} | ${kb(r.state + r.store)} | ${kb(r.state)} | ${kb(r.checkpoints)} | ${kb(r.store)} | ${kb(r.ours)} | ${kb(r.total)} |`,
        );
      const firstOurs = rows[0].ours;
      const firstAll = rows[0].total;
      out.push(
        "",
        `Seven turns: interpreter state ${kb(rows.at(-1).ours)} = ${(rows.at(-1).ours / firstOurs).toFixed(2)}× the first turn; everything ${kb(rows.at(-1).total)} = ${(rows.at(-1).total / firstAll).toFixed(2)}× the first turn.`,
        "",
      );
      const big = restoreTime(layout.kind, layout.where, thread, runs);
      const smallThread = `small-${thread}`;
      {
        const { createCodeInterpreterMiddleware } = await importRoot("dist/langchain/index.js");
        const backend = await openBackend(layout.kind, layout.where);
        const interpreter = createCodeInterpreterMiddleware({ snapshotSigningKey: KEY });
        await runTurn({ interpreter, ...backend }, smallThread, SMALL, `${smallThread}-1`);
        interpreter.dispose();
        await backend.close();
      }
      const small = restoreTime(layout.kind, layout.where, smallThread, runs);
      out.push(
        `Restore in a fresh process (median of ${runs} processes, each having served another thread first):`,
        "",
        "| state | snapshot | the first eval waits (store read left + restore) | store read (from beforeAgent, beside the model call) | of it, left when the eval starts | restore (Sandbox.restoreAsync + body digest) | checkpointer read (every run) | agent run, first minus the next three's median (wall) | same (CPU, all threads) |",
        "|---|---|---|---|---|---|---|---|---|",
      );
      for (const [name, r] of [
        ["10,000 rows", big],
        ["small (an object and a function)", small],
      ]) {
        out.push(
          `| ${name} | ${r.snapshotBytes === undefined ? "in graph state" : kb(r.snapshotBytes)} | ${ms(r.restoreMs)} | ${ms(r.storeMs)} | ${ms(r.loadWaitMs)} | ${ms(r.sandboxRestoreMs)} | ${ms(r.checkpointerMs)} | ${ms(r.addedMs)} | ${ms(r.addedCpuMs)} |`,
        );
      }
      out.push("");
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${out.join("\n")}\n`);
}

await main();
