/**
 * deps/fetch-quickjs.sh on a machine without apt (a clone on macOS, Fedora, Alpine): it clones the
 * upstream tag named in the lock file and builds only from files whose sha256 matches the lock.
 * The "upstream" here is a local git repository made from the pristine tree (deps/quickjs-ng-src,
 * present after `npm ci`), reached through QUICKJS_NG_GIT_URL: no network is used.
 */
import { spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const pristine = join(root, "deps/quickjs-ng-src");
const lock = JSON.parse(readFileSync(join(root, "deps/quickjs-ng.lock.json"), "utf8")) as { upstream: { tag: string } };
// Each case copies the engine tree, commits it and runs the fetch script with its ten patches.
const slowCase = 120_000;
let work: string;
let pathWithoutApt: string;

function git(cwd: string, ...args: string[]): void {
  const r = spawnSync("git", ["-c", "user.name=test", "-c", "user.email=test@invalid", ...args], {
    cwd,
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
}

/** A git repository holding `files` (name -> content), tagged with the lock file's tag. */
function upstreamRepo(name: string, edit: (dir: string) => void): string {
  const dir = join(work, name);
  cpSync(pristine, dir, { recursive: true });
  writeFileSync(join(dir, "README.md"), "files outside the pinned set are ignored\n");
  edit(dir);
  git(dir, "init", "-q");
  git(dir, "add", "-A");
  git(dir, "commit", "-qm", "release");
  git(dir, "tag", lock.upstream.tag);
  return `file://${dir}`;
}

/** A copy of deps/ (no engine tree) run with apt-get hidden; returns the exit code and stderr. */
function fetchWithoutApt(name: string, gitUrl: string): { status: number | null; stderr: string; deps: string } {
  const deps = join(work, name, "deps");
  mkdirSync(deps, { recursive: true });
  for (const part of ["fetch-quickjs.sh", "debian-mirror.sh", "quickjs-ng.lock.json", "patches"]) {
    cpSync(join(root, "deps", part), join(deps, part), { recursive: true });
  }
  const env = { ...process.env, PATH: pathWithoutApt, QUICKJS_NG_GIT_URL: gitUrl };
  delete env.QUICKJS_NG_SRC;
  const r = spawnSync("bash", [join(deps, "fetch-quickjs.sh")], { env, encoding: "utf8" });
  return { status: r.status, stderr: r.stderr, deps };
}

beforeAll(() => {
  if (!existsSync(join(pristine, "quickjs.c")))
    throw new Error("deps/quickjs-ng-src is missing: run `bash deps/fetch-quickjs.sh`");
  work = mkdtempSync(join(tmpdir(), "qjsn-fetch-"));
  // Every executable on PATH except apt and apt-get, as on a machine that is not Debian.
  pathWithoutApt = join(work, "bin");
  mkdirSync(pathWithoutApt);
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) continue;
    for (const name of readdirSync(dir)) {
      if (/^apt(-get)?$/.test(name) || existsSync(join(pathWithoutApt, name))) continue;
      symlinkSync(join(dir, name), join(pathWithoutApt, name));
    }
  }
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("fetch-quickjs.sh without apt", () => {
  it(
    "builds its tree from the upstream tag when every pinned file matches",
    () => {
      const url = upstreamRepo("upstream-good", () => {});
      const r = fetchWithoutApt("good", url);
      expect(r.stderr).toContain(`cloning ${lock.upstream.tag}`);
      expect(r.status).toBe(0);
      // The patched tree is there, and the pristine copy holds exactly the pinned files.
      expect(existsSync(join(r.deps, "quickjs-ng/.stamp"))).toBe(true);
      expect(readdirSync(join(r.deps, "quickjs-ng-src")).sort()).toEqual(readdirSync(pristine).sort());
      expect(readFileSync(join(r.deps, "quickjs-ng-src/quickjs.c"))).toEqual(readFileSync(join(pristine, "quickjs.c")));
    },
    slowCase,
  );

  it(
    "refuses a tag whose engine source differs from the pinned sha256, naming the file",
    () => {
      const url = upstreamRepo("upstream-tampered", (dir) => {
        writeFileSync(
          join(dir, "quickjs.c"),
          readFileSync(join(dir, "quickjs.c"), "utf8").replace("JS_NewRuntime", "JS_NewRuntimX"),
        );
      });
      const r = fetchWithoutApt("tampered", url);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/differs from the pinned QuickJS-ng .*refusing to build/s);
      expect(r.stderr).toContain("quickjs.c: FAILED");
      expect(existsSync(join(r.deps, "quickjs-ng"))).toBe(false);
    },
    slowCase,
  );

  it(
    "refuses a tag that lacks a pinned file",
    () => {
      const url = upstreamRepo("upstream-missing", (dir) => rmSync(join(dir, "libregexp.c")));
      const r = fetchWithoutApt("missing", url);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain("libregexp.c");
      expect(existsSync(join(r.deps, "quickjs-ng"))).toBe(false);
    },
    slowCase,
  );
});
