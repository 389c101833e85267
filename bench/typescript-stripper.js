// Cost of run-time type stripping on the thread that runs it: the first TypeScript transform of a
// process (loading the stripper) and the median of 200 transforms of erasable TypeScript and of an
// enum (compiled), in ms. Compare two builds by pointing at each one's root (after npm run build:ts):
//   node bench/typescript-stripper.js [root]     # default: this checkout
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const root = resolve(process.argv[2] ?? ".");
const { transformCodeLazily } = await import(pathToFileURL(`${root}/dist/langchain/transform-javascript.js`).href);
const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
const timed = async (source) => {
  const start = performance.now();
  await transformCodeLazily(source);
  return performance.now() - start;
};

const first = await timed("const a: number = 1\na");
const erased = [];
const compiled = [];
for (let i = 0; i < 200; i++) {
  erased.push(
    await timed(
      `interface R { id: number }\nconst rows: R[] = [{ id: ${i} }]\nfunction f(r: R): number { return r.id }\nrows.map(f)`,
    ),
  );
  compiled.push(await timed(`enum E { A = ${i} }\nE.A`));
}
console.log(
  JSON.stringify({
    root,
    firstTypeScriptMs: +first.toFixed(1),
    erasedMedianMs: +median(erased).toFixed(3),
    enumMedianMs: +median(compiled).toFixed(3),
  }),
);
