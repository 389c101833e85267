/**
 * `quickjs-native eval <code | -f file>`: one eval in a fresh sandbox, the value printed like
 * `node -p`, or as JSON with `--json`. Exit code 1 when the guest code fails.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Sandbox } from "../index.js";
import { LIMIT_FLAGS, LIMIT_HELP, UsageError, sandboxOptionsFrom } from "./options.js";
import { describeError, replayConsole, reportJson, show } from "./output.js";

export const EVAL_HELP = `Usage: quickjs-native eval [options] <code>
       quickjs-native eval [options] -f <file>     (- reads stdin)

Evaluates JavaScript in a fresh sandbox and prints the completion value. Top-level await works.
Exit code: 0 on success, 1 when the guest code throws or hits a limit, 2 on a usage error.

Options:
  -f, --file <path>       read the code from a file
  --json                  print one JSON object: {ok, value?, inspect, console, stats} or {ok:false, error}
${LIMIT_HELP}
  -h, --help              show this help`;

/** Runs the `eval` command; resolves to the process exit code. */
export async function evalCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { ...LIMIT_FLAGS, file: { type: "string", short: "f" }, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
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
    try {
      code = readFileSync(values.file === "-" ? 0 : values.file, "utf8");
    } catch (err) {
      throw new UsageError(`cannot read ${values.file}: ${(err as Error).message}`);
    }
  } else {
    if (positionals.length === 0) throw new UsageError("nothing to evaluate: quickjs-native eval \"1 + 1\" or -f <file>");
    code = positionals.join(" ");
  }

  using sandbox = new Sandbox(sandboxOptionsFrom(values));
  const report = await sandbox.run(code, { filename, unserializable: "describe" });
  if (values.json) {
    process.stdout.write(`${reportJson(report)}\n`);
  } else {
    replayConsole(report.console, report.consoleTruncated, process.stdout, process.stderr);
    if (report.ok) process.stdout.write(`${show(report.value, process.stdout.isTTY === true)}\n`);
    else process.stderr.write(`${describeError(report.error)}\n`);
  }
  return report.ok ? 0 : 1;
}
