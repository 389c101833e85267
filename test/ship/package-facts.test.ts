/**
 * Facts about the package that a first-time user runs into: what `engines` promises, what the
 * README tells them to type, what the published source maps point at.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { engines: { node: string } };
const readme = readFileSync(join(root, "README.md"), "utf8");

/** True when `version` satisfies `range`, a `||` of `^x.y.z` and `>=x.y.z` parts (all `engines` uses). */
function satisfies(version: string, range: string): boolean {
  const v = version.split(".").map(Number);
  const cmp = (a: number[], b: number[]): number => a.reduce((d, x, i) => d || x - b[i]!, 0);
  return range.split("||").some((part) => {
    const m = /^\s*(\^|>=)(\d+)\.(\d+)\.(\d+)\s*$/.exec(part);
    if (!m) throw new Error(`engines part '${part}' is not ^x.y.z or >=x.y.z`);
    const floor = [Number(m[2]), Number(m[3]), Number(m[4])];
    return cmp(v, floor) >= 0 && (m[1] === ">=" || v[0] === floor[0]);
  });
}

describe("engines names only Node versions whose require() loads the package", () => {
  it("admits 20.19+, 22.12+ and 24, and no release where require() of an ES module throws", () => {
    for (const ok of ["20.19.0", "20.20.2", "22.12.0", "24.0.0"])
      expect(satisfies(ok, pkg.engines.node), ok).toBe(true);
    for (const bad of ["18.20.0", "20.0.0", "20.18.3", "21.7.0", "22.11.0"])
      expect(satisfies(bad, pkg.engines.node), bad).toBe(false);
  });

  it("require() loads every entry point on this Node", () => {
    const code = `for (const e of ["quickjs-native", "quickjs-native/langchain"]) if (!Object.keys(require(e)).length) process.exit(3);`;
    const r = spawnSync(process.execPath, ["-e", code], { cwd: root, encoding: "utf8", timeout: 60_000 });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  }, 70_000);
});

describe("README instructions", () => {
  it("forces a source build with npm_config_build_from_source, not the flag npm 11 deprecates", () => {
    expect(readme).toContain("npm_config_build_from_source=true npm install quickjs-native");
    expect(readme).not.toMatch(/npm install[^\n`]*--build-from-source/);
  });

  it("names npm run test:unit beside npm test", () => {
    expect(readme).toMatch(/npm run test:unit/);
  });
});

describe("published source maps", () => {
  it("carry the sources they map to (src/ is not in the package)", () => {
    const maps = (readdirSync(join(root, "dist"), { recursive: true }) as string[]).filter((f) => f.endsWith(".map"));
    expect(maps.length).toBeGreaterThan(0);
    for (const file of maps) {
      const map = JSON.parse(readFileSync(join(root, "dist", file), "utf8")) as {
        sources: string[];
        sourcesContent?: unknown[];
      };
      expect(map.sourcesContent?.length, file).toBe(map.sources.length);
      expect(
        map.sourcesContent!.every((c) => typeof c === "string"),
        file,
      ).toBe(true);
    }
  });
});
