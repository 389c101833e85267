/**
 * The `quickjs-native` command fed hostile input: unterminated statements piped into `repl`
 * (each line used to re-parse everything before it: quadratic), an endless stream into
 * `eval -f -` (read whole into memory), and guest text carrying terminal control sequences
 * (ESC, OSC, BEL) written raw to a terminal.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { PARSE_ALLOWANCE, PARSE_FACTOR, PendingInput } from "../../src/cli/incomplete.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "dist/cli/index.js");
/** Makes the CLI believe stdout and stderr are terminals. */
const FAKE_TTY = "data:text/javascript,process.stdout.isTTY=true;process.stderr.isTTY=true;";

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI; `feed` writes its stdin (and must end it). */
function run(args: string[], feed: (stdin: NodeJS.WritableStream) => void, nodeFlags: string[] = []): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, cli, ...args], {
      cwd: root,
      stdio: ["pipe", "pipe", "pipe"],
      timeout: 100_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.stdin.on("error", () => {}); // the child may stop reading first
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    feed(child.stdin);
  });
}

beforeAll(() => {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build:ts\``);
});

describe("repl: an unterminated statement piped in", () => {
  const lines = (n: number) => Array.from({ length: n }, (_, i) => `  total = total + ${i};`);

  it("is not parsed again after every line while a bracket is open", () => {
    let parsed = 0;
    const input = new PendingInput((code) => {
      parsed += code.length;
      throw Object.assign(new Error("Unexpected token"), { pos: code.length });
    });
    expect(input.add("function f() {")).toBe(true);
    for (const line of lines(3200)) expect(input.add(line)).toBe(true);
    expect(input.parses).toBe(0);
    expect(parsed).toBe(0);
  });

  it("parses statements the scanner cannot settle within a budget linear in their length", () => {
    let parsed = 0;
    const input = new PendingInput((code) => {
      parsed += code.length;
      throw Object.assign(new Error("Unexpected token"), { pos: code.length });
    });
    for (let i = 0; i < 20_000; i++) input.add(`if (x${i})`);
    expect(parsed).toBeLessThanOrEqual(PARSE_ALLOWANCE + PARSE_FACTOR * input.text.length);
    expect(input.parses).toBeGreaterThan(0);
  });

  it("still tells complete statements from unfinished ones", () => {
    const cases: [string[], boolean][] = [
      [["let a = 1"], false],
      [["function f() {", "return 1", "}"], false],
      [["const s = `a", "${1 + ", "2}`"], false],
      [["/* open", "comment */ 1"], false],
      [["x = /[(]/.test('(')"], false],
      [["x = 4 / 2 / (1)"], false],
      [["a++"], false],
      [["x = 1 +", "2"], false],
      [["if (x)", "y()"], false],
      [["'unterminated"], false],
    ];
    for (const [parts, unfinished] of cases) {
      const input = new PendingInput();
      const verdicts = parts.map((line) => input.add(line));
      expect({ parts, verdicts }).toEqual({ parts, verdicts: [...parts.slice(1).map(() => true), unfinished] });
    }
  });

  it("reports the syntax error of 200 KB of unterminated input once input ends", async () => {
    const text = ["let total = 0", "{", ...lines(8000), ""].join("\n");
    const r = await run(["repl"], (stdin) => stdin.end(text));
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/Uncaught SyntaxError/);
  }, 120_000);
});

describe("eval -f - fed an endless stream", () => {
  it("stops reading at 64 MiB and says so, exit code 2", async () => {
    const chunk = Buffer.from("x = 1;\n".repeat(64 * 1024));
    const r = await run(["eval", "-f", "-"], (stdin) => {
      let written = 0;
      const pump = (): void => {
        while (written < 80 * 1024 * 1024) {
          written += chunk.length;
          if (!stdin.write(chunk)) {
            stdin.once("drain", pump);
            return;
          }
        }
        stdin.end();
      };
      pump();
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("stdin holds more than 64 MiB of code");
  }, 120_000);
});

describe("guest text on a terminal", () => {
  const code = String.raw`console.log("title\x1b]0;pwned\x07 bell"); console.error("\x1b[2Jclear\r"); throw new Error("red\x1b[31m\u009b")`;

  it("escapes ESC, OSC, BEL, CR and C1 in console output and errors", async () => {
    const r = await run(["eval", code], (stdin) => stdin.end(), ["--import", FAKE_TTY]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(String.raw`title\x1B]0;pwned\x07 bell`);
    expect(r.stderr).toContain(String.raw`\x1B[2Jclear\x0D`);
    expect(r.stderr).toContain(String.raw`red\x1B[31m\x9B`);
    expect(`${r.stdout}${r.stderr}`).not.toMatch(/[\x07\x1b\r\x9b]/);
  });

  it("escapes them in shown values without losing colors for plain ones", async () => {
    const r = await run(["eval", String.raw`new Error("a\x1b]0;x\x07")`], (stdin) => stdin.end(), [
      "--import",
      FAKE_TTY,
    ]);
    expect(r.stdout).not.toMatch(/[\x07\x1b]/);
    const plain = await run(["eval", "[1, 'two']"], (stdin) => stdin.end(), ["--import", FAKE_TTY]);
    expect(plain.stdout).toContain("\x1b[33m1\x1b[39m");
  });

  it("writes them unchanged to a pipe", async () => {
    const r = await run(["eval", String.raw`console.log("\x1b[1mbold\x1b[22m")`], (stdin) => stdin.end());
    expect(r.stdout).toContain("\x1b[1mbold\x1b[22m");
  });
});
