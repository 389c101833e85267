// The raw-C floor: builds bench/c-floor/harness.c against the pinned QuickJS-ng sources with
// cc -O2 (the addon's engine flags) and runs it. Objects are cached in bench/.work/c-floor.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const bench = fileURLToPath(new URL("../", import.meta.url));
const root = fileURLToPath(new URL("../../", import.meta.url));
const qjsDir = `${root}deps/quickjs-ng`;
const outDir = `${bench}.work/c-floor`;
const CFLAGS = ["-O2", "-D_GNU_SOURCE", "-w"];

/** Build flags as shown in the report. */
export const C_FLOOR_FLAGS = `cc ${CFLAGS.join(" ")} (same engine flags as the addon's CMake Release build)`;

function engineSources() {
  const lock = JSON.parse(readFileSync(`${root}deps/quickjs-ng.lock.json`, "utf8"));
  return lock.engineSources;
}

function ensureSources(say) {
  if (existsSync(`${qjsDir}/quickjs.c`)) return;
  say("fetching pinned QuickJS-ng sources (bash deps/fetch-quickjs.sh)");
  execFileSync("bash", [`${root}deps/fetch-quickjs.sh`], { stdio: ["ignore", "inherit", "inherit"] });
}

/** Runs cc jobs two at a time (the machine has 2 cores); throws with cc's output on failure. */
async function compileAll(jobs) {
  const runOne = (args) =>
    new Promise((resolve, reject) => {
      const child = spawn("cc", args, { stdio: ["ignore", "ignore", "pipe"] });
      let err = "";
      child.stderr.on("data", (d) => (err += d));
      child.on("error", reject);
      child.on("close", (code) =>
        code === 0 ? resolve() : reject(new Error(`cc ${args.join(" ")}: ${err.slice(0, 2000)}`)),
      );
    });
  const queue = [...jobs];
  await Promise.all(
    [0, 1].map(async () => {
      while (queue.length) await runOne(queue.shift());
    }),
  );
}

/** Path of an up-to-date harness binary, building it when sources or flags changed. */
export async function buildCFloor(say) {
  ensureSources(say);
  mkdirSync(outDir, { recursive: true });
  const sources = engineSources().map((f) => `${qjsDir}/${f}`);
  const harness = `${bench}c-floor/harness.c`;
  const hash = createHash("sha256");
  for (const f of [...sources, harness, `${qjsDir}/quickjs.h`]) hash.update(readFileSync(f));
  hash.update(CFLAGS.join(" "));
  const stamp = hash.digest("hex");
  const binary = `${outDir}/harness`;
  if (existsSync(binary) && existsSync(`${outDir}/stamp`) && readFileSync(`${outDir}/stamp`, "utf8") === stamp)
    return binary;
  say("compiling the raw-C floor (QuickJS-ng at -O2, about 30 s, cached afterwards)");
  const objects = sources.map((s) => `${outDir}/${s.split("/").pop().replace(/\.c$/, ".o")}`);
  await compileAll(sources.map((s, i) => [...CFLAGS, "-c", s, "-o", objects[i]]));
  await compileAll([[...CFLAGS, `-I${qjsDir}`, harness, ...objects, "-o", binary, "-lm", "-lpthread"]]);
  writeFileSync(`${outDir}/stamp`, stamp);
  return binary;
}

/** Runs the harness; resolves to its parsed JSON ({ quickjs, rows }). */
export function runCFloor(binary, { guestDir, jsonInputPath, timeMs, minIterations, timeoutMs }) {
  const result = spawnSync(binary, [guestDir, jsonInputPath, String(timeMs), String(minIterations)], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    timeout: timeoutMs,
    maxBuffer: 16 * 1024 * 1024,
  });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`c-floor harness exited with ${result.status ?? result.signal}`);
  return JSON.parse(result.stdout);
}
