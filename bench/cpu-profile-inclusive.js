#!/usr/bin/env node
// Reads a V8 CPU profile (node --cpu-prof) and prints, for the functions named, the share of the
// samples in which each is on the stack (inclusive time) and its own share (self time), idle
// samples left out, with the microseconds per operation they make of `--cpu-us=N` (the main
// thread's CPU per operation measured apart, e.g. by bench/telemetry-overhead.js --interleaved).
//
//   node bench/cpu-profile-inclusive.js PROFILE.cpuprofile --cpu-us=45 '#runNow' handOver observeEval
import { readFileSync } from "node:fs";

const [file, ...rest] = process.argv.slice(2);
const cpuUs = Number(rest.find((a) => a.startsWith("--cpu-us="))?.slice(9) ?? Number.NaN);
const names = rest.filter((a) => !a.startsWith("--"));
const profile = JSON.parse(readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
const inclusive = new Map(names.map((n) => [n, 0]));
const own = new Map(names.map((n) => [n, 0]));
let samples = 0;
for (const id of profile.samples) {
  const leaf = byId.get(id).callFrame.functionName;
  if (leaf === "(idle)") continue;
  samples++;
  if (own.has(leaf)) own.set(leaf, own.get(leaf) + 1);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parentOf.get(at)) seen.add(byId.get(at).callFrame.functionName);
  for (const name of names) if (seen.has(name)) inclusive.set(name, inclusive.get(name) + 1);
}
console.log(`${samples} samples (idle left out)`);
for (const name of names) {
  const inc = inclusive.get(name) / samples;
  const self = own.get(name) / samples;
  const us = Number.isNaN(cpuUs)
    ? ""
    : `, ${(inc * cpuUs).toFixed(1)} µs / ${(self * cpuUs).toFixed(1)} µs per operation`;
  console.log(`${name}: inclusive ${(100 * inc).toFixed(1)}%, self ${(100 * self).toFixed(1)}%${us}`);
}
