#!/usr/bin/env node
// One timed case of the full bench alone, for before/after comparisons of a change that moves it:
// `node --expose-gc bench/timed-case.js CASE [CHECKOUT]` runs case CASE (an id of
// bench/workloads/cases.js, e.g. snapshot-1m) against the quickjs-native build of CHECKOUT (dist/
// and build/Release; default this checkout) exactly as a bench/run.js child does, and prints its
// row as JSON. Run it for two checkouts in alternating order (A B A B) and compare the medians:
// one process's median moves by several percent from one process to the next on a shared machine.
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { nativeAdapter } from "./engines/quickjs-native.js";
import { runTimedCases } from "./lib/timed-cases.js";

const [caseId, checkout] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
if (!caseId) throw new Error("usage: node --expose-gc bench/timed-case.js CASE [CHECKOUT]");
const root = `${resolve(checkout ?? fileURLToPath(new URL("..", import.meta.url)))}/`;
const adapter = nativeAdapter({ id: "quickjs-native", label: "quickjs-native", root, checkout: root });
await adapter.load();
const [row] = await runTimedCases(adapter, { quick: false, ids: [caseId] });
console.log(JSON.stringify({ checkout: root, ...row }));
