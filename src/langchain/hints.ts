/**
 * Deterministic hints for mistakes models make over and over in code mode. Each rule looks at the
 * report of one eval (and what the eval did) and returns one short hint or nothing; the first rule
 * that matches wins. Wording lives in prompts.ts (`HINT_TEXT`).
 */
import { GuestOpaque, type EvalReport } from "../index.js";
import type { EvalActivity } from "./activity.js";
import { HINT_TEXT } from "./prompts.js";
import type { PtcToolView } from "./ptc.js";
import { TYPE_NAMES } from "./transform-type-arguments.js";

/** What the rules may consult besides the report. */
export interface HintContext {
  activity: EvalActivity;
  /** Tools of this eval's `tools` namespace. */
  view: PtcToolView;
  /** Global names of the sandbox, read only when a rule needs them (they cost an eval). */
  globalNames: () => readonly string[];
  /** The wall-clock budget of the eval, ms. */
  wallTimeoutMs: number;
}

type Rule = (report: EvalReport, context: HintContext) => string | undefined;

/** QuickJS says `unexpected token: 'object'` where V8 says `"[object Object]" is not valid JSON`. */
const JSON_PARSE_OF_OBJECT = /unexpected token: 'object'|"\[object Object\]" is not valid JSON/;

const jsonParseObject: Rule = (report) => {
  if (report.ok || report.error.guest?.name !== "SyntaxError") return undefined;
  const guest = report.error.guest;
  const fromParse =
    guest.stack === undefined || /\bparse \(native\)|JSON/.test(guest.stack) || /JSON/.test(guest.message);
  return fromParse && JSON_PARSE_OF_OBJECT.test(guest.message) ? HINT_TEXT.jsonParseObject : undefined;
};

const unawaitedPromise: Rule = (report) =>
  report.ok && report.value instanceof GuestOpaque && report.value.kind === "promise"
    ? HINT_TEXT.unawaitedPromise
    : undefined;

const TOOL_NON_OBJECT = /^tools\.([\p{ID_Continue}$]+) takes one object argument/u;

const toolNonObject: Rule = (report, { view }) => {
  if (report.ok) return undefined;
  const camelName = TOOL_NON_OBJECT.exec(report.error.guest?.message ?? "")?.[1];
  const tool = camelName === undefined ? undefined : view.byCamelName.get(camelName);
  if (camelName === undefined || tool === undefined) return undefined;
  return HINT_TEXT.toolNonObject(camelName, inputFields(tool.tool.schema));
};

/** The engine's message for a call of a missing `tools` member (deps/patches/0008). */
const NOT_A_TOOL = /^tools\.([\p{ID_Start}$_][\p{ID_Continue}$]*) is not a function$/u;
/** Longer names get no suggestions: the distance is quadratic in the length, on the main thread. */
const MAX_SUGGESTED_FROM = 64;
const MAX_SUGGESTIONS = 3;

const unknownTool: Rule = (report, { view }) => {
  if (report.ok || report.error.guest?.name !== "TypeError") return undefined;
  const missing = NOT_A_TOOL.exec(report.error.guest.message)?.[1];
  if (
    missing === undefined ||
    missing.length > MAX_SUGGESTED_FROM ||
    view.byGuestName.has(missing) ||
    view.byCamelName.size === 0
  )
    return undefined;
  const key = looseKey(missing);
  const ranked = [...view.byCamelName.values()]
    .map((tool) => ({
      camelName: tool.camelName,
      distance: Math.min(editDistance(key, looseKey(tool.camelName)), editDistance(key, looseKey(tool.name))),
    }))
    .sort((a, b) => a.distance - b.distance || a.camelName.localeCompare(b.camelName));
  return HINT_TEXT.unknownTool(
    missing,
    ranked.slice(0, MAX_SUGGESTIONS).map((t) => t.camelName),
  );
};

const NOT_DEFINED = /^([\p{ID_Start}$_][\p{ID_Continue}$]*) is not defined$/u;

const similarName: Rule = (report, { view, globalNames }) => {
  if (report.ok || report.error.guest?.name !== "ReferenceError") return undefined;
  const missing = NOT_DEFINED.exec(report.error.guest.message)?.[1];
  if (missing === undefined) return undefined;
  const key = looseKey(missing);
  // Tools first: `web_search` or `webSearch` written without `tools.` is the common slip.
  for (const [camelName, tool] of view.byCamelName) {
    if (camelName === missing || looseKey(camelName) === key || looseKey(tool.name) === key)
      return HINT_TEXT.similarName(missing, `tools.${camelName}`);
  }
  const match = globalNames().find((name) => name !== missing && looseKey(name) === key);
  return match === undefined ? undefined : HINT_TEXT.similarName(missing, match);
};

// A ReferenceError for a TypeScript type keyword is almost surely a type argument read as a comparison.
const typeArgumentsAsComparisons: Rule = (report) => {
  if (report.ok || report.error.guest?.name !== "ReferenceError") return undefined;
  const missing = NOT_DEFINED.exec(report.error.guest.message)?.[1];
  return missing !== undefined && TYPE_NAMES.has(missing) ? HINT_TEXT.typeArgumentsAsComparisons(missing) : undefined;
};

const toolTimeout: Rule = (report, { activity, wallTimeoutMs, view }) => {
  if (report.ok || report.error.code !== "TIMEOUT" || report.error.budget !== "wall" || activity.cutOff.length === 0)
    return undefined;
  const camel = new Map([...view.byCamelName.values()].map((t) => [t.name, `tools.${t.camelName}`]));
  const names = [...new Set(activity.cutOff)].map((name) => camel.get(name) ?? name);
  return HINT_TEXT.toolTimeout(names, wallTimeoutMs);
};

const RULES: readonly Rule[] = [
  jsonParseObject,
  unawaitedPromise,
  toolNonObject,
  unknownTool,
  typeArgumentsAsComparisons,
  similarName,
  toolTimeout,
];

/** The hint for the first known mistake `report` shows, if any. */
export function hintFor(report: EvalReport, context: HintContext): string | undefined {
  for (const rule of RULES) {
    const hint = rule(report, context);
    if (hint !== undefined) return hint;
  }
  return undefined;
}

/** Same key for names that differ only in case, `_`, `-` or `$`: `web_search` ~ `webSearch`, `json` ~ `JSON`. */
function looseKey(name: string): string {
  return name.replace(/[_$-]/g, "").toLowerCase();
}

/** Levenshtein distance: insertions, deletions and substitutions of one character each cost 1. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** Top-level property names of a tool's input schema (Zod or JSON schema), required ones first. */
function inputFields(schema: unknown): string[] {
  if (typeof schema !== "object" || schema === null) return [];
  const zodShape = (schema as { shape?: unknown }).shape;
  if (typeof zodShape === "object" && zodShape !== null) return Object.keys(zodShape).slice(0, 6);
  const json = schema as { properties?: unknown; required?: unknown };
  if (typeof json.properties !== "object" || json.properties === null) return [];
  const required = Array.isArray(json.required) ? json.required.filter((r): r is string => typeof r === "string") : [];
  const all = Object.keys(json.properties);
  return [...new Set([...required, ...all])].slice(0, 6);
}
