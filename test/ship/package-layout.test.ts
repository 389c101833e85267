/**
 * The layout of the built package (dist/, `npm run build:ts`; `npm test` builds it first): the
 * engine is one bundled module (scripts/bundle.js), and everything else reaches it only through
 * the public entry point, so no module can load a second copy of it and none imports a module the
 * bundle absorbed.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const dist = join(root, "dist");

/** Every file below `dir` whose name ends with `suffix`. */
function filesBelow(dir: string, suffix: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(suffix))
    .map((name) => join(dir, name));
}

/** The relative module specifiers of a file's static and dynamic imports and re-exports. */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const found = text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^import\s+)["'](\.{1,2}\/[^"']+)["']/gm);
  return [...found].map((m) => m[1] as string);
}

beforeAll(() => {
  if (!existsSync(join(dist, "index.js"))) throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
});

describe("the built package", () => {
  it("loads the engine as one module, whose source map points at src/", () => {
    expect(relativeImports(join(dist, "index.js"))).toEqual([]);
    const map = JSON.parse(readFileSync(join(dist, "index.js.map"), "utf8")) as { sources: string[] };
    const sources = map.sources.map((source) => relative(root, resolve(dist, source)));
    expect(sources).toContain(join("src", "sandbox.ts"));
    for (const source of sources) expect(existsSync(join(root, source)), source).toBe(true);
  });

  it("imports no module the bundle absorbed: every relative import of dist/ resolves", () => {
    const dangling = filesBelow(dist, ".js").flatMap((file) =>
      relativeImports(file)
        .filter((spec) => !existsSync(resolve(dirname(file), spec)))
        .map((spec) => `${relative(dist, file)} imports ${spec}`),
    );
    expect(dangling).toEqual([]);
  });

  it("reaches the engine from src/langchain and src/cli only through src/index.ts", () => {
    const engineFiles = new Set(readdirSync(join(root, "src")).filter((name) => name.endsWith(".ts")));
    const reachingPast = ["langchain", "cli"].flatMap((folder) =>
      filesBelow(join(root, "src", folder), ".ts").flatMap((file) =>
        relativeImports(file)
          .map((spec) => relative(join(root, "src"), resolve(dirname(file), spec)).replace(/\.js$/, ".ts"))
          .filter((target) => engineFiles.has(target) && target !== "index.ts")
          .map((target) => `${relative(root, file)} imports src/${target}`),
      ),
    );
    expect(reachingPast).toEqual([]);
  });
});
