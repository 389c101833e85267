/**
 * The acceptance scenario of mode "thread" as a new user meets it: two separate Node processes
 * share one checkpointer and store. Process A defines data, a function, a class, an instance and
 * a Map, then exits; process B continues the same thread and uses all of them. Runs on SQLite
 * (checkpointer and SqliteStore files, no server), on SQLite without a store (state chunks in the
 * checkpointer), and on PostgreSQL with and without a store when QJSN_POSTGRES_URL is set
 * (scripts/with-postgres.sh starts a throwaway cluster and sets it); without it the Postgres
 * cases are reported as skipped. Runs the
 * compiled package (dist/, `npm run build:ts`) in child processes.
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

type Backend = "sqlite" | "sqlite-inline" | "postgres" | "postgres-inline";
const postgresUrl = process.env.QJSN_POSTGRES_URL;

function runProcess(
  backend: Backend,
  location: string,
  threadId: string,
  runId: string,
  code: string,
  key: string,
): string {
  const r = spawnSync(process.execPath, [script, backend, location, threadId, runId, code], {
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
const byRegion = new Map(data.map((r) => [r.region, r.sales]));
acc.add(score(data[0]));
`;
const TURN_TWO = `data.forEach((r) => acc.add(score(r))); ({ regions: data.map((r) => r.region).join(","), total: acc.total(), count: acc.items.length, east: byRegion.get("east"), isAcc: acc instanceof Acc })`;

/** A fresh location per case: a SQLite file, or the Postgres URL with a thread id of its own. */
let cases = 0;
function location(backend: Backend): { where: string; thread: string } {
  const n = ++cases;
  const thread = `orders-${process.pid}-${Date.now()}-${n}`;
  return backend.startsWith("postgres")
    ? { where: postgresUrl!, thread }
    : { where: join(dir, `checkpoints-${n}.sqlite`), thread };
}

const backends: { backend: Backend; title: string; skip: boolean }[] = [
  { backend: "sqlite", title: "SQLite checkpointer and SqliteStore (no server)", skip: false },
  {
    backend: "sqlite-inline",
    title: "SQLite checkpointer without a store (state chunks in the checkpointer)",
    skip: false,
  },
  {
    backend: "postgres",
    title:
      postgresUrl === undefined
        ? "PostgreSQL (skipped: set QJSN_POSTGRES_URL, or run under scripts/with-postgres.sh)"
        : "PostgreSQL checkpointer and PostgresStore",
    skip: postgresUrl === undefined,
  },
  {
    backend: "postgres-inline",
    title:
      postgresUrl === undefined
        ? "PostgreSQL without a store (skipped: set QJSN_POSTGRES_URL)"
        : "PostgreSQL checkpointer without a store (state chunks in the checkpointer)",
    skip: postgresUrl === undefined,
  },
];

for (const { backend, title, skip } of backends)
  describe(`two processes on one ${title}`, () => {
    it.skipIf(skip)(
      "process B continues process A's thread: data, a function, a class instance and a Map work after A exited",
      () => {
        if (!existsSync(join(root, "dist/langchain/index.js")))
          throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
        const { where, thread } = location(backend);
        const key = "a-signing-key-of-at-least-16-bytes";
        const first = runProcess(backend, where, thread, "a", TURN_ONE, key);
        expect(first).toMatch(/<result>\n1\n<\/result>/);
        const second = runProcess(backend, where, thread, "b", TURN_TWO, key);
        expect(second).not.toMatch(/<notice>/);
        expect(second).toMatch(/regions: 'north,south,east'/);
        expect(second).toMatch(/total: 52/);
        expect(second).toMatch(/count: 4/);
        expect(second).toMatch(/east: 200/);
        expect(second).toMatch(/isAcc: true/);
      },
    );

    it.skipIf(skip)("a third process with another signing key refuses the stored state and says so", () => {
      const { where, thread } = location(backend);
      runProcess(backend, where, thread, "a", "const secret = 42", "first-signing-key-0123456789");
      const other = runProcess(backend, where, thread, "b", "typeof secret", "other-signing-key-0123456789");
      expect(other).toMatch(
        /<notice>\nThe saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT/,
      );
      expect(other).toMatch(/<result>\nundefined\n<\/result>/);
    });
  });
