/**
 * The acceptance scenario of mode "thread" as a new user meets it: two separate Node processes
 * share one SQLite checkpointer file. Process A defines data, a function, a class and an instance,
 * then exits; process B continues the same thread and uses all of them. Runs the compiled package
 * (dist/, `npm run build:ts`) in child processes.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const script = fileURLToPath(new URL("./support/persistence-process.mjs", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "qjsn-persist-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runProcess(dbFile: string, threadId: string, runId: string, code: string, key: string): string {
  const r = spawnSync(process.execPath, [script, dbFile, threadId, runId, code], {
    cwd: root,
    env: { ...process.env, SNAPSHOT_KEY: key },
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`child process failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout) as string;
}

const TURN_ONE = `
const data = [{ region: "north", sales: 120 }, { region: "south", sales: 80 }, { region: "east", sales: 200 }];
function score(r) { return Math.round(r.sales / 10); }
class Acc { constructor() { this.items = []; } add(x) { this.items.push(x); return this.items.length; } total() { return this.items.reduce((a, b) => a + b, 0); } }
const acc = new Acc();
acc.add(score(data[0]));
`;
const TURN_TWO = `data.forEach((r) => acc.add(score(r))); ({ regions: data.map((r) => r.region).join(","), total: acc.total(), count: acc.items.length })`;

describe("two processes on one SQLite checkpointer", () => {
  it("process B continues process A's thread: data, score and acc.total() work after A exited", () => {
    if (!existsSync(join(root, "dist/langchain/index.js"))) throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
    const db = join(dir, "checkpoints.sqlite");
    const key = "a-signing-key-of-at-least-16-bytes";
    const first = runProcess(db, "orders", "a", TURN_ONE, key);
    expect(first).toMatch(/<result>\n1\n<\/result>/);
    const second = runProcess(db, "orders", "b", TURN_TWO, key);
    expect(second).not.toMatch(/<notice>/);
    expect(second).toMatch(/regions: 'north,south,east'/);
    expect(second).toMatch(/total: 52/);
    expect(second).toMatch(/count: 4/);
  });

  it("a third process with another signing key refuses the stored state and says so", () => {
    const db = join(dir, "foreign.sqlite");
    runProcess(db, "t", "a", "const secret = 42", "first-signing-key-0123456789");
    const other = runProcess(db, "t", "b", "typeof secret", "other-signing-key-0123456789");
    expect(other).toMatch(/<notice>\nThe saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT/);
    expect(other).toMatch(/<result>\nundefined\n<\/result>/);
  });
});
