/**
 * The acceptance scenario of `interruptOn` for calls from code, as a new user meets it: separate
 * Node processes share only one SQLite checkpointer file. Process A's eval pauses at send_email;
 * process B resumes it with the reviewer's decision. Tool runs of every process go to one log file.
 * Runs the compiled package (dist/, `npm run build:ts`) in child processes.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const script = fileURLToPath(new URL("./support/approval-process.mjs", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "qjsn-approval-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const KEY = "a-signing-key-of-at-least-16-bytes";

interface ProcessResult {
  interrupt: { actionRequests: { name: string; args: Record<string, unknown> }[] } | null;
  text: string | null;
}

function runProcess(db: string, threadId: string, log: string, input: string): ProcessResult {
  const r = spawnSync(process.execPath, [script, db, threadId, log, input], {
    cwd: root,
    env: { ...process.env, SNAPSHOT_KEY: KEY },
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`child process failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout) as ProcessResult;
}

function toolRuns(log: string): { tool: string; [key: string]: unknown }[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8")
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as { tool: string });
}

const LOOKUP_THEN_SEND = `
const who = await tools.lookup({ name: "ada" });
const receipt = await tools.sendEmail({ to: who.email, body: "hello" });
({ who: who.email, receipt })`;

// Each test starts up to four Node processes that load LangChain, one after another: counted work
// that took 26-39 s on a loaded 2-core machine, so the limit is per test, well above that.
describe("a paused eval resumes in another process sharing only the SQLite checkpointer", { timeout: 180_000 }, () => {
  it("A pauses at send_email (lookup ran once, nothing sent); B approves: sent once, lookup not rerun, both outputs in the result", () => {
    if (!existsSync(join(root, "dist/langchain/index.js")))
      throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
    const db = join(dir, "approve.sqlite");
    const log = join(dir, "approve.log");
    const first = runProcess(db, "mail", log, LOOKUP_THEN_SEND);
    expect(first.interrupt?.actionRequests[0]).toMatchObject({
      name: "send_email",
      args: { to: "ada@example.com", body: "hello" },
    });
    expect(toolRuns(log)).toEqual([{ tool: "lookup", name: "ada" }]);

    const second = runProcess(db, "mail", log, JSON.stringify({ decisions: [{ type: "approve" }] }));
    expect(second.interrupt).toBeNull();
    expect(toolRuns(log)).toEqual([
      { tool: "lookup", name: "ada" },
      { tool: "send_email", to: "ada@example.com", body: "hello" },
    ]);
    expect(second.text).toContain("who: 'ada@example.com'");
    expect(second.text).toContain("receipt: 'sent to ada@example.com'");
  });

  it("two reviewed calls pause in turn across three processes; each runs exactly once", () => {
    const db = join(dir, "two.sqlite");
    const log = join(dir, "two.log");
    const code = `
const a = await tools.sendEmail({ to: "a@example.com", body: "1" });
const who = await tools.lookup({ name: "bob" });
const b = await tools.sendEmail({ to: who.email, body: "2" });
a + " | " + b`;
    const approve = JSON.stringify({ decisions: [{ type: "approve" }] });
    expect(runProcess(db, "two", log, code).interrupt?.actionRequests[0]?.args).toEqual({
      to: "a@example.com",
      body: "1",
    });
    expect(runProcess(db, "two", log, approve).interrupt?.actionRequests[0]?.args).toEqual({
      to: "bob@example.com",
      body: "2",
    });
    const last = runProcess(db, "two", log, approve);
    expect(last.interrupt).toBeNull();
    expect(toolRuns(log).map((r) => r.tool)).toEqual(["send_email", "lookup", "send_email"]);
    expect(last.text).toContain("sent to a@example.com | sent to bob@example.com");
  });

  it("B rejects with a message: the guest catches it and nothing is sent; another thread's B edits: the tool gets the edited arguments", () => {
    const db = join(dir, "decisions.sqlite");
    const log = join(dir, "decisions.log");
    const catching = `
const who = await tools.lookup({ name: "ada" });
try { await tools.sendEmail({ to: who.email, body: "hello" }) } catch (e) { e.name + ": " + e.message }`;
    runProcess(db, "reject", log, catching);
    const rejected = runProcess(
      db,
      "reject",
      log,
      JSON.stringify({ decisions: [{ type: "reject", message: "not today" }] }),
    );
    expect(rejected.text).toContain("ToolCallRejectedError: not today");
    expect(toolRuns(log)).toEqual([{ tool: "lookup", name: "ada" }]);

    runProcess(db, "edit", log, LOOKUP_THEN_SEND);
    const edit = { type: "edit", editedAction: { name: "send_email", args: { to: "grace@example.com", body: "hi" } } };
    const edited = runProcess(db, "edit", log, JSON.stringify({ decisions: [edit] }));
    expect(edited.text).toContain("receipt: 'sent to grace@example.com'");
    expect(toolRuns(log).filter((r) => r.tool === "send_email")).toEqual([
      { tool: "send_email", to: "grace@example.com", body: "hi" },
    ]);
  });
});
