/**
 * Deciding whether code that parses as JavaScript was meant as TypeScript with type arguments.
 *
 * `Array.from<number>([1, 2])` is valid JavaScript: `(Array.from < number) > [1, 2]`, which fails
 * with "number is not defined". Models write type arguments on calls all the time, so when the
 * JavaScript reading compares against a TypeScript type name, the TypeScript reading is tried
 * first (`transformCode` keeps the JavaScript reading when the TypeScript one does not parse).
 * `a < b > (c)` between values stays two comparisons: only type names count, and only when the
 * code never uses the name otherwise (a variable called `number` is a value).
 *
 * This is only the decision; how types are stripped is `transform.ts`'s business.
 */
import type { Node, Program } from "acorn";

/**
 * TypeScript's type keywords that are not JavaScript values: an identifier with one of these names
 * next to `<` or `>` is almost surely a type argument read as a comparison.
 */
export const TYPE_NAMES: ReadonlySet<string> = new Set([
  "string",
  "number",
  "boolean",
  "bigint",
  "symbol",
  "object",
  "any",
  "unknown",
  "never",
]);

/** Cheap test before walking the tree: most code names no type keyword at all. */
const MENTIONS_TYPE_NAME = /\b(?:string|number|boolean|bigint|symbol|object|any|unknown|never)\b/;

/** Operators a type argument list turns into when read as JavaScript (`f<Map<string, number>>(x)` has `>>`). */
const ANGLE_OPERATORS: ReadonlySet<string> = new Set(["<", ">", ">>", ">>>"]);

/**
 * True when `program` (parsed from `source`) compares against a TypeScript type name
 * (`f<number>(x)`, `new Set<string>(s)`, `f<string | number>(x)`) and uses no type name in any
 * other way.
 */
export function comparesAgainstTypeNames(source: string, program: Program): boolean {
  if (!MENTIONS_TYPE_NAME.test(source)) return false;
  const operands = new Set<Node>();
  const typeNames: Node[] = [];
  // An explicit stack: deeply nested code must not overflow the host's.
  const pending: unknown[] = [program];
  while (pending.length > 0) {
    const value = pending.pop();
    if (Array.isArray(value)) {
      for (const item of value) pending.push(item);
      continue;
    }
    if (!isNode(value)) continue;
    if (value.type === "Identifier" && TYPE_NAMES.has((value as Node & { name: string }).name)) typeNames.push(value);
    if (value.type === "BinaryExpression") {
      const binary = value as Node & { operator: string; left: Node; right: Node };
      if (ANGLE_OPERATORS.has(binary.operator)) operands.add(binary.left).add(binary.right);
    }
    for (const child of Object.values(value)) if (typeof child === "object" && child !== null) pending.push(child);
  }
  return typeNames.length > 0 && typeNames.every((identifier) => operands.has(identifier));
}

function isNode(value: unknown): value is Node {
  return typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string";
}
