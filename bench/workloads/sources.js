// The guest programs every engine runs, read from guest/ so the JS adapters and the C floor
// execute byte-identical sources. guest/ is kept out of the formatter (biome.json): an adapter
// wraps a source as it is (`await (${code})`), so a semicolon added after the last expression
// stops it parsing, and a baseline checkout is only comparable while the bytes stay the same.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const guestDir = fileURLToPath(new URL("./guest/", import.meta.url));

/** Absolute path of one guest source file. */
export function guestPath(name) {
  return guestDir + name;
}

const cache = new Map();

/** Text of one guest source file (trailing newline kept: it is part of the source). */
export function guestSource(name) {
  if (!cache.has(name)) cache.set(name, readFileSync(guestPath(name), "utf8"));
  return cache.get(name);
}
