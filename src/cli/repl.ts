/**
 * `quickjs-native repl`: an interactive prompt over one persistent sandbox. Declarations stay
 * between lines; `.reset` starts a fresh sandbox; Ctrl-C stops a running eval.
 */
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { Sandbox } from "../index.js";
import type { SandboxOptions } from "../index.js";
import { PendingInput } from "./incomplete.js";
import { LIMIT_FLAGS, LIMIT_HELP, sandboxOptionsFrom } from "./options.js";
import { describeError, formatBytes, forStream, replayConsole, showOn, statsLine } from "./output.js";

export const REPL_HELP = `Usage: quickjs-native repl [options]

An interactive prompt over one sandbox: variables persist between lines, each result shows
its duration and the sandbox's memory. Reads lines from stdin when it is not a terminal.

Options:
${LIMIT_HELP}
  -h, --help              show this help`;

const COMMANDS = `.help    this list
.reset   dispose the sandbox and start a fresh one (all variables are gone)
.memory  the sandbox's memory use and limit
.exit    leave (Ctrl-D works too)
Ctrl-C stops a running eval, or clears the current input.`;

/** Runs the `repl` command; resolves to the process exit code once input ends or `.exit` is typed. */
export async function replCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { ...LIMIT_FLAGS, help: { type: "boolean", short: "h" } } });
  if (values.help) {
    process.stdout.write(`${REPL_HELP}\n`);
    return 0;
  }
  const options: SandboxOptions = sandboxOptionsFrom(values);
  const interactive = process.stdin.isTTY === true;
  const colors = process.stdout.isTTY === true;
  const dim = (s: string): string => (colors ? `\x1b[2m${s}\x1b[22m` : s);
  const out = process.stdout;

  let sandbox = new Sandbox(options);
  const limits = sandbox.options;
  out.write(
    `quickjs-native REPL · memory ${formatBytes(limits.memoryLimitBytes)} · timeout ${limits.executionTimeoutMs} ms · .help for commands\n`,
  );

  const rl = createInterface({ input: process.stdin, output: out, terminal: interactive, prompt: "qjs> " });
  const pending = new PendingInput();
  let running: AbortController | undefined;
  let ctrlC = false;
  const prompt = (): void => {
    if (interactive) {
      rl.setPrompt(pending.text ? "...  " : "qjs> ");
      rl.prompt();
    }
  };

  rl.on("SIGINT", () => {
    if (running) {
      running.abort();
      return;
    }
    if (pending.text || rl.line) {
      pending.clear();
      ctrlC = false;
      out.write("\n");
      rl.write(null, { ctrl: true, name: "u" }); // clear the half-typed line
      prompt();
      return;
    }
    if (ctrlC) {
      rl.close();
      return;
    }
    ctrlC = true;
    out.write("\n(To exit, press Ctrl-C again, Ctrl-D or type .exit)\n");
    prompt();
  });

  const evaluate = async (code: string): Promise<void> => {
    running = new AbortController();
    try {
      const report = await sandbox.run(code, {
        filename: "<repl>",
        signal: running.signal,
        unserializable: "describe",
      });
      replayConsole(report.console, report.consoleTruncated, out, process.stderr);
      if (report.ok) out.write(`${showOn(report.value, out)}\n`);
      else process.stderr.write(`${forStream(describeError(report.error), process.stderr)}\n`);
      out.write(`${dim(statsLine(report.stats))}\n`);
      if (!report.ok && report.error.code === "BROKEN") {
        sandbox.dispose();
        sandbox = new Sandbox(options);
        out.write("The sandbox was stuck and has been replaced by a fresh one: earlier variables are gone.\n");
      }
    } finally {
      running = undefined;
    }
  };

  prompt();
  for await (const line of rl) {
    ctrlC = false;
    if (!pending.text) {
      const command = line.trim();
      if (command === ".exit") break;
      if (command === ".help") {
        out.write(`${COMMANDS}\n`);
        prompt();
        continue;
      }
      if (command === ".reset") {
        sandbox.dispose();
        sandbox = new Sandbox(options);
        out.write("Fresh sandbox: all variables are gone.\n");
        prompt();
        continue;
      }
      if (command === ".memory") {
        const m = sandbox.memoryUsage();
        out.write(
          `${formatBytes(m.usedBytes)} used · peak ${formatBytes(m.peakBytes)} · limit ${formatBytes(m.limitBytes)}\n`,
        );
        prompt();
        continue;
      }
    }
    if (pending.add(line) || !pending.text) {
      prompt();
      continue;
    }
    const code = pending.text;
    pending.clear();
    await evaluate(code);
    prompt();
  }
  // Input ended inside an unfinished statement: let the engine report what is wrong with it.
  if (pending.text.trim()) await evaluate(pending.text);
  rl.close();
  sandbox.dispose();
  if (interactive) out.write("\n");
  return 0;
}
