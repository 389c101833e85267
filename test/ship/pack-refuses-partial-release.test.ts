/**
 * `npm pack` in a clone must not ship this machine's binary alone, silently: `prepack` passes only
 * with the release set in prebuilds/ (every target, built by --release from the current sources)
 * and otherwise refuses in one line that says how to make it, unless QJSN_HOST_ONLY_TARBALL asks
 * for a host-only tarball. Runs scripts/prebuild.js in a copy of the inputs it digests.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
let copy: string;

function prepack(env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: Record<string, string> };
  const [command, ...args] = pkg.scripts.prepack!.split(" ");
  expect(command).toBe("node");
  const clean = { ...process.env };
  delete clean.QJSN_HOST_ONLY_TARBALL;
  const r = spawnSync(process.execPath, args, {
    cwd: copy,
    env: { ...clean, ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  copy = mkdtempSync(join(tmpdir(), "qjsn-prepack-"));
  for (const part of [
    "scripts/prebuild.js",
    "package.json",
    "CMakeLists.txt",
    "native",
    "deps/patches",
    "deps/quickjs-ng.lock.json",
  ]) {
    mkdirSync(dirname(join(copy, part)), { recursive: true });
    cpSync(join(root, part), join(copy, part), { recursive: true });
  }
});
afterAll(() => rmSync(copy, { recursive: true, force: true }));

describe("prepack", () => {
  it("refuses, in one line naming scripts/test-platforms.sh, when prebuilds/ holds only this machine's binary", () => {
    // What `npm run prebuild` leaves: a host binary and its stamp, no release stamps.
    mkdirSync(join(copy, "prebuilds/linux-x64"), { recursive: true });
    writeFileSync(join(copy, "prebuilds/linux-x64/quickjs-native.napi.glibc.node"), "host build");
    const r = prepack();
    expect(r.status).toBe(1);
    expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(r.stderr).toContain("bash scripts/test-platforms.sh");
    expect(r.stderr).toContain("linux-arm64");
    expect(r.stderr).toContain("QJSN_HOST_ONLY_TARBALL=1");
  });

  it("passes once every release binary is there, built by --release from these sources", () => {
    // The stamps --release writes, with the digest of the current sources.
    const stamps = join(copy, "build-prebuild/stamps");
    mkdirSync(stamps, { recursive: true });
    const digest = spawnSync(process.execPath, ["scripts/prebuild.js", "--digest"], {
      cwd: copy,
      encoding: "utf8",
    }).stdout.trim();
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    for (const [dir, file] of [
      ["linux-x64", "quickjs-native.napi.glibc.node"],
      ["linux-arm64", "quickjs-native.napi.glibc.node"],
      ["win32-x64", "quickjs-native.napi.node"],
    ] as const) {
      mkdirSync(join(copy, "prebuilds", dir), { recursive: true });
      writeFileSync(join(copy, "prebuilds", dir, file), "release build");
      writeFileSync(join(stamps, dir), digest);
      writeFileSync(join(stamps, `${dir}.release`), digest);
    }
    // fetch-quickjs.sh is not in the copy: passing the check is enough to show (bash fails after it).
    const r = prepack();
    expect(r.stdout).toContain("prebuilds/ holds the release set");
    expect(r.stderr).not.toContain("refusing");
  });
});
