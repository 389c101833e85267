/**
 * The `quickjs-native` command as a user runs it: the compiled dist/cli/index.js in a child
 * process, arguments and stdin in, stdout/stderr/exit code out. `npm test` compiles first.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "dist/cli/index.js");

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(args: string[], stdin?: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { cwd: root, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin ?? "");
  });
}

beforeAll(() => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build:ts\` (npm test does)`);
});

describe("quickjs-native eval", () => {
  it("prints the value the way node's util.inspect does", async () => {
    const r = await run(["eval", "[1,2,3].map(x=>x*2)"]);
    expect(r).toEqual({ code: 0, stdout: "[ 2, 4, 6 ]\n", stderr: "" });
  });

  it("prints a returned Error as node does, name and message first, and a class instance with its class name", async () => {
    const error = await run(["eval", "({ err: new TypeError('bad thing') })"]);
    expect(error.code).toBe(0);
    expect(error.stdout).toMatch(/^\{\n {2}err: TypeError: bad thing\n {6}at <eval> \(<eval>:1:\d+\)\n\}\n$/);
    const instance = await run(["eval", "class P { constructor() { this.x = 1; } }; new P()"]);
    expect(instance).toEqual({ code: 0, stdout: "P { x: 1 }\n", stderr: "" });
  });

  it("prints strings quoted and nested objects expanded, like the node REPL", async () => {
    const r = await run(["eval", "({ name: 'q', tags: new Set(['a']), big: 2n ** 70n })"]);
    expect(r.stdout).toBe("{ name: 'q', tags: Set(1) { 'a' }, big: 1180591620717411303424n }\n");
  });

  it("awaits top-level await and replays console output before the value", async () => {
    const r = await run(["eval", "console.log('step', 1); console.error('careful'); await Promise.resolve(40) + 2"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("step 1\n42\n");
    expect(r.stderr).toBe("careful\n");
  });

  it("exits 1 and reports the guest's error on stderr when the code throws", async () => {
    const r = await run(["eval", "throw new TypeError('bad input')"]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("Uncaught TypeError: bad input");
  });

  it("exits 1 on a syntax error", async () => {
    const r = await run(["eval", "let = ;"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^Uncaught SyntaxError: /);
  });

  it("applies --timeout and --memory-limit to the guest", async () => {
    const slow = await run(["eval", "--timeout", "50", "for(;;){}"]);
    expect(slow.code).toBe(1);
    expect(slow.stderr).toContain("TIMEOUT: the execution budget of 50 ms ran out");
    const big = await run(["eval", "--memory-limit", "2MiB", "new Uint8Array(8 * 1024 * 1024).length"]);
    expect(big.code).toBe(1);
    expect(big.stderr).toContain(`OUT_OF_MEMORY: the guest ran out of memory (limit ${2 * 1024 * 1024} bytes)`);
  });

  it("--json gives the exact value when JSON can hold it, and inspect text always", async () => {
    const exact = await run(["eval", "--json", "({ a: [1, 'two', null], b: { c: true } })"]);
    expect(exact.code).toBe(0);
    const parsed = JSON.parse(exact.stdout) as Record<string, unknown>;
    expect(parsed).toMatchObject({
      ok: true,
      value: { a: [1, "two", null], b: { c: true } },
      console: [],
      consoleTruncated: false,
    });
    expect(parsed.stats).toMatchObject({ hostCalls: 0 });

    const lossy = JSON.parse((await run(["eval", "--json", "[1n, undefined, NaN]"])).stdout) as Record<string, unknown>;
    expect(lossy).not.toHaveProperty("value");
    expect(lossy.inspect).toBe("[ 1n, undefined, NaN ]");
  });

  it("--json reports guest failures as data with exit code 1", async () => {
    const r = await run(["eval", "--json", "console.log('before'); throw new RangeError('out')"]);
    expect(r.code).toBe(1);
    const parsed = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(parsed).toMatchObject({
      ok: false,
      error: { code: "GUEST_ERROR", guest: { name: "RangeError", message: "out" } },
      console: [{ level: "log", text: "before" }],
    });
  });

  it("shows functions as placeholders instead of failing", async () => {
    const r = await run(["eval", "({ f: function named() {} })"]);
    expect(r).toMatchObject({ code: 0, stdout: "{ f: [Function named] }\n" });
  });

  describe("with -f", () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), "qjsn-cli-"));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("reads the code from a file and reports its errors", async () => {
      const file = join(dir, "job.js");
      writeFileSync(file, "const total = [3, 4].reduce((a, b) => a + b, 0);\ntotal * 6\n");
      expect(await run(["eval", "-f", file])).toEqual({ code: 0, stdout: "42\n", stderr: "" });
      writeFileSync(file, "function fail() { throw new Error('in file') }\nfail()\n");
      const failed = await run(["eval", "-f", file]);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain("Uncaught Error: in file");
    });

    it("reads stdin with -f -", async () => {
      expect(await run(["eval", "-f", "-"], "6 * 7")).toMatchObject({ code: 0, stdout: "42\n" });
    });

    it("exits 2 when the file cannot be read", async () => {
      const r = await run(["eval", "-f", join(dir, "missing.js")]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("cannot read");
    });
  });

  it("exits 2 with a usage error, not a stack trace, on limit flags out of the engine's range", async () => {
    for (const args of [
      ["eval", "--memory-limit", "100", "1"],
      ["eval", "--timeout", "99999999999", "1"],
      ["eval", "--stack-size", "1k", "1"],
      ["eval", "--wall-timeout", "99999999999", "1"],
      ["repl", "--memory-limit", "64GiB"],
    ]) {
      const r = await run(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toMatch(
        /^quickjs-native: --[a-z-]+: \S+ is out of range \(.*\)\nRun `quickjs-native --help` for usage\.\n$/,
      );
    }
  });

  it("--json rounds the measured times to the microsecond", async () => {
    const parsed = JSON.parse((await run(["eval", "--json", "1"])).stdout) as {
      stats: { wallMs: number; executionMs: number };
    };
    for (const ms of [parsed.stats.wallMs, parsed.stats.executionMs]) expect(Math.round(ms * 1000) / 1000).toBe(ms);
  });

  it("exits 2 with usage text on unknown flags, bad sizes and missing code", async () => {
    for (const args of [["eval", "--bogus", "1"], ["eval", "--memory-limit", "lots", "1"], ["eval"], ["frobnicate"]]) {
      const r = await run(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toContain("quickjs-native --help");
    }
  });
});

describe("quickjs-native repl with piped stdin", () => {
  it("keeps variables and functions between lines, including multi-line input", async () => {
    const r = await run(
      ["repl"],
      ["let xs = [1, 2, 3]", "function scale(v, k) {", "  return v.map((x) => x * k)", "}", "scale(xs, 10)", ""].join(
        "\n",
      ),
    );
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    expect(lines).toContain("[ 10, 20, 30 ]");
    expect(r.stderr).toBe("");
  });

  it("prints duration and memory after each eval", async () => {
    const r = await run(["repl"], "1 + 1\n");
    expect(r.stdout).toMatch(
      /\n2\n\d+(\.\d+)? (µs|ms) exec · \d+(\.\d+)? (µs|ms) wall · \d+(\.\d+)? (B|KiB|MiB) used \(peak /,
    );
  });

  it(".reset drops every variable; errors do not end the session", async () => {
    const r = await run(
      ["repl"],
      ["const secret = 'kept'", "secret", "nope()", "secret.length", ".reset", "typeof secret", ""].join("\n"),
    );
    const values = r.stdout.split("\n").filter((l) => !/ exec · /.test(l));
    expect(values).toEqual([
      expect.stringMatching(/^quickjs-native REPL/),
      "undefined",
      "'kept'",
      "4",
      "Fresh sandbox: all variables are gone.",
      "'undefined'",
      "",
    ]);
    expect(r.stderr).toContain("Uncaught ReferenceError: nope is not defined");
  });

  it("applies limit flags to the session and survives a timeout", async () => {
    const r = await run(["repl", "--timeout", "50"], "let n = 1\nwhile (true) {}\nn + 1\n");
    expect(r.stderr).toContain("TIMEOUT: the execution budget of 50 ms ran out");
    expect(r.stdout.split("\n")).toContain("2");
  });

  it(".exit stops reading input", async () => {
    const r = await run(["repl"], "1\n.exit\n'after exit'\n");
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("after exit");
  });
});

describe("quickjs-native bench", () => {
  // Driven in-process against stand-in package roots: the real suite takes minutes (.ci/run runs it).
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "qjsn-bench-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function benchIn(packageRoot: string): Promise<{ code: number; stderr: string }> {
    const { benchCommand } = await import("../../src/cli/bench.js");
    let stderr = "";
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    try {
      return { code: benchCommand([], packageRoot), stderr };
    } finally {
      spy.mockRestore();
    }
  }

  it("says the suite lives in the repository when run from an installed package", async () => {
    const r = await benchIn(dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("not part of the npm package");
  });

  it("says how to install the benchmark dependencies when bench/node_modules is missing", async () => {
    mkdirSync(join(dir, "bench"), { recursive: true });
    writeFileSync(join(dir, "bench/run.js"), "");
    const r = await benchIn(dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cd ${join(dir, "bench")} && npm install`);
  });

  it("runs npm run bench:quick in the package root once the dependencies are there", async () => {
    mkdirSync(join(dir, "bench/node_modules"), { recursive: true });
    const marker = join(dir, "ran.txt");
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({
        name: "stand-in",
        scripts: { "bench:quick": `node -e "require('fs').writeFileSync('ran.txt','quick')"` },
      }),
    );
    const spawned = await benchIn(dir);
    expect(spawned.code).toBe(0);
    expect(readFileSync(marker, "utf8")).toBe("quick");
  });
});
