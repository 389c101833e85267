/**
 * What `npm install quickjs-native` brings into a project without LangChain: the production
 * dependency closure of package.json (peers left out, as npm leaves optional peers out). Build
 * tools belong only where a build happens (scripts/install.js drives cmake itself), zod only
 * to the LangChain layer (langchain brings it), and the TypeScript compiler (23 MiB) only to this
 * package's own build: model-written TypeScript is stripped by swc compiled to WebAssembly (3.6 MiB). `bash scripts/install-size.sh` measures the real
 * install; the README quotes its figure.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

interface Manifest {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** Where node would resolve `name` from a package at `from` (the nearest node_modules up the tree). */
function resolvePackage(name: string, from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dirname(dir) === dir) throw new Error(`${name} is not installed (from ${from})`);
  }
}

/** Every package a production install of the manifest at `dir` brings, by name. */
function productionClosure(dir: string): Set<string> {
  const seen = new Set<string>();
  const visit = (at: string): void => {
    const manifest = JSON.parse(readFileSync(join(at, "package.json"), "utf8")) as Manifest;
    for (const name of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) {
      if (seen.has(name)) continue;
      seen.add(name);
      try {
        visit(resolvePackage(name, at));
      } catch {
        // an optional dependency for another platform
      }
    }
  };
  visit(dir);
  return seen;
}

/** Bytes of every file under `dir`. */
function bytesUnder(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) total += statSync(join(entry.parentPath, entry.name)).size;
  return total;
}

const MB = 1_000_000;

describe("npm install quickjs-native without LangChain", () => {
  const closure = productionClosure(root);

  it("pulls no build tool (cmake-js, tar): a source build drives cmake itself", () => {
    expect([...closure].filter((name) => ["cmake-js", "tar", "node-gyp"].includes(name))).toEqual([]);
  });

  it("pulls no zod: only the LangChain layer uses it, and langchain brings it", () => {
    expect(closure.has("zod")).toBe(false);
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    expect(manifest.peerDependenciesMeta.zod?.optional).toBe(true);
  });

  it("the source build script needs nothing but node-api-headers and node-addon-api to find the headers", () => {
    const install = readFileSync(join(root, "scripts/install.js"), "utf8");
    expect(install).toMatch(/require\("node-api-headers"\)/);
    expect(install).toMatch(/require\("node-addon-api"\)\.include_dir/);
    for (const name of ["node-api-headers", "node-addon-api", "node-gyp-build"])
      expect(closure.has(name), name).toBe(true);
  });

  it("pulls no TypeScript compiler: run-time type stripping is @swc/wasm-typescript, pinned", () => {
    expect([...closure].filter((name) => ["typescript", "ts-blank-space"].includes(name))).toEqual([]);
    expect(closure.has("@swc/wasm-typescript")).toBe(true);
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Required<Manifest>;
    expect(manifest.dependencies["@swc/wasm-typescript"]).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("the dependencies weigh under 6 MB, leaving the package itself room under the 15 MB install", () => {
    const bytes = [...closure].reduce((sum, name) => sum + bytesUnder(resolvePackage(name, root)), 0);
    expect(bytes).toBeLessThan(6 * MB);
  });

  it("the README quotes the measured figure, at most 15 MB, and the script that measures it", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const figure =
      /\*\*Install size\.\*\* The Sandbox alone installs \d+ packages, ([\d.]+) MiB on disk \(`bash scripts\/install-size\.sh`/.exec(
        readme,
      );
    expect(figure).not.toBeNull();
    expect(Number(figure?.[1]) * 1024 * 1024).toBeLessThanOrEqual(15 * MB);
    expect(existsSync(join(root, "scripts/install-size.sh"))).toBe(true);
  });
});
