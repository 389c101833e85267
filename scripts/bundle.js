// Joins the engine's modules, as tsc wrote them into dist/, into the one file dist/index.js, after
// `tsc` in `npm run build:ts`. Node's ESM loader costs about 1.3 ms per module (resolve, read,
// compile, link): the 16 modules of src/ took a process 42 ms to import where the 8 of the
// pre-redesign layout took 29.5; bundled, it takes 26. src/ keeps one concept per file.
//
// The bundle's source map points at src/*.ts through tsc's maps. The .d.ts files stay as they are
// (dist/index.d.ts re-exports from them); the modules the bundle absorbed are deleted, so nothing
// can load a second copy of a class. Everything else in dist/ imports the engine as ../index.js.
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { rolldown } from "rolldown";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
const entry = join(dist, "index.js");

// Hands rolldown each module with tsc's source map, so that the bundle's map composes with it.
const tscSourceMaps = {
  name: "tsc-source-maps",
  load(id) {
    if (!id.startsWith(dist) || !existsSync(`${id}.map`)) return null;
    const code = readFileSync(id, "utf8").replace(/\n\/\/# sourceMappingURL=.*\s*$/, "\n");
    return { code, map: readFileSync(`${id}.map`, "utf8") };
  },
};

const bundle = await rolldown({
  input: entry,
  platform: "node",
  // Dependencies stay packages of their own; only dist/ is joined.
  external: (id) => !id.startsWith(".") && !id.startsWith(dist),
  plugins: [tscSourceMaps],
  // A warning (an unresolved import, a missing export) would ship a broken bundle.
  onLog(level, log) {
    if (level === "warn") throw new Error(`bundle: ${log.message}`);
  },
});
const { output } = await bundle.write({ file: entry, format: "esm", sourcemap: true });
await bundle.close();

const [chunk] = output;
for (const id of chunk.moduleIds) {
  if (id === entry) continue;
  rmSync(id);
  rmSync(`${id}.map`, { force: true });
}
console.log(`bundle: dist/index.js joins ${chunk.moduleIds.length} modules`);
