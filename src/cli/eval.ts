/**
 * `quickjs-native eval <code | -f file>`: one eval in a fresh sandbox, the value printed like
 * `node -p`, or as JSON with `--json`. Exit code 1 when the guest code fails.
 */
import { createReadStream } from "node:fs";
import { parseArgs } from "node:util";
import { Sandbox } from "../index.js";
import { LIMIT_FLAGS, LIMIT_HELP, UsageError, sandboxOptionsFrom } from "./options.js";
import { describeError, forStream, replayConsole, reportJson, showOn } from "./output.js";

export const EVAL_HELP = `Usage: quickjs-native eval [options] <code>
       quickjs-native eval [options] -f <file>     (- reads stdin)

Evaluates JavaScript in a fresh sandbox and prints the completion value. Top-level await works.
Exit code: 0 on success, 1 when the guest code throws or hits a limit, 2 on a usage error.

Options:
  -f, --file <path>       read the code from a file
  --json                  print one JSON object: {ok, value?, inspect, console, stats} or {ok:false, error}
${LIMIT_HELP}
  -h, --help              show this help`;

/** Most code `eval` reads from a file or stdin: an endless input is refused here, not read into memory. */
export const MAX_CODE_BYTES = 64 * 1024 * 1024;

/** Reads `file` (`-`: stdin) as UTF-8, refusing input over {@link MAX_CODE_BYTES} once that many bytes arrived. */
async function readCode(file: string): Promise<string> {
  const input = file === "-" ? process.stdin : createReadStream(file);
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of input) {
      const piece = typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer);
      bytes += piece.length;
      if (bytes > MAX_CODE_BYTES)
        throw new UsageError(
          `${file === "-" ? "stdin" : file} holds more than ${MAX_CODE_BYTES / 1024 / 1024} MiB of code: eval reads at most that much`,
        );
      chunks.push(piece);
    }
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  } finally {
    if (input !== process.stdin) input.destroy();
    else input.pause();
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Runs the `eval` command; resolves to the process exit code. */
export async function evalCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      ...LIMIT_FLAGS,
      file: { type: "string", short: "f" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(`${EVAL_HELP}\n`);
    return 0;
  }
  let code: string;
  let filename = "<eval>";
  if (values.file !== undefined) {
    if (positionals.length) throw new UsageError("give either code or -f <file>, not both");
    filename = values.file === "-" ? "<stdin>" : values.file;
    code = await readCode(values.file);
  } else {
    if (positionals.length === 0) throw new UsageError('nothing to evaluate: quickjs-native eval "1 + 1" or -f <file>');
    code = positionals.join(" ");
  }

  using sandbox = new Sandbox(sandboxOptionsFrom(values));
  const report = await sandbox.run(code, { filename, unserializable: "describe" });
  if (values.json) {
    process.stdout.write(`${reportJson(report)}\n`);
  } else {
    replayConsole(report.console, report.consoleTruncated, process.stdout, process.stderr);
    if (report.ok) process.stdout.write(`${showOn(report.value, process.stdout)}\n`);
    else process.stderr.write(`${forStream(describeError(report.error), process.stderr)}\n`);
  }
  return report.ok ? 0 : 1;
}
