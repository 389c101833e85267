#!/usr/bin/env node
/**
 * The `quickjs-native` command: `repl`, `eval` and `bench` over the sandbox engine.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { isSandboxError } from "../index.js";
import { benchCommand } from "./bench.js";
import { evalCommand } from "./eval.js";
import { UsageError } from "./options.js";
import { replCommand } from "./repl.js";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

const HELP = `Usage: quickjs-native <command> [options]

Commands:
  repl                    interactive prompt over one persistent sandbox
  eval <code | -f file>   evaluate code in a fresh sandbox and print the value
  bench                   run the quick benchmark (needs the repository's bench/ dependencies)

Run \`quickjs-native <command> --help\` for a command's options.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "repl":
      return replCommand(rest);
    case "eval":
      return evalCommand(rest);
    case "bench":
      return benchCommand(rest, packageRoot);
    case "-v":
    case "--version": {
      const pkg = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as { version: string };
      process.stdout.write(`${pkg.version}\n`);
      return 0;
    }
    case undefined:
    case "-h":
    case "--help":
    case "help":
      process.stdout.write(`${HELP}\n`);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // parseArgs reports unknown or malformed flags with ERR_PARSE_ARGS_* codes: those are usage errors
    // too, and so is a limit the engine refuses (a stack cap above what this machine's threads allow).
    const usage =
      err instanceof UsageError ||
      isSandboxError(err, "INVALID_ARGUMENT") ||
      (err as { code?: unknown }).code?.toString().startsWith("ERR_PARSE_ARGS");
    if (!usage) throw err;
    process.stderr.write(`quickjs-native: ${(err as Error).message}\nRun \`quickjs-native --help\` for usage.\n`);
    process.exitCode = 2;
  },
);
