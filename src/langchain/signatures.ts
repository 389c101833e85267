/**
 * TypeScript signatures of the `tools` namespace, rendered from each tool's JSON schema, for the
 * system prompt. Models read TypeScript declarations far more reliably than raw JSON schema.
 */
import { createHash } from "node:crypto";

/** A JSON schema (draft 7 / 2020-12 subset that tool schemas use). Unknown keywords are ignored. */
export type JSONSchema = boolean | JSONSchemaObject;

/** The object form of a {@link JSONSchema}. */
export interface JSONSchemaObject {
  type?: string | string[];
  description?: string;
  title?: string;
  properties?: Record<string, JSONSchema>;
  required?: string[];
  additionalProperties?: JSONSchema;
  items?: JSONSchema | JSONSchema[];
  prefixItems?: JSONSchema[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JSONSchema[];
  oneOf?: JSONSchema[];
  allOf?: JSONSchema[];
  $ref?: string;
  $defs?: Record<string, JSONSchema>;
  definitions?: Record<string, JSONSchema>;
  nullable?: boolean;
  default?: unknown;
  format?: string;
  [keyword: string]: unknown;
}

/** A tool as the `tools` namespace exposes it. */
export interface ToolSignatureInput {
  /** The tool's own name (`web_search`). */
  name: string;
  /** Its property name in `tools` (`webSearch`), see {@link camelCaseToolName}. */
  camelName: string;
  description: string;
  /** JSON schema of the tool's one input object. */
  schema: JSONSchema;
}

/**
 * The property name of a tool in the guest's `tools` namespace: `web_search` → `webSearch`,
 * `read-file` → `readFile`, `HTTPGet` → `httpGet`. Always a valid identifier. Two tools may map to
 * the same name; the caller refuses such collisions.
 */
export function camelCaseToolName(name: string): string {
  const words = name.split(/[^\p{ID_Continue}$]+|_+/u).filter((word) => word !== "");
  if (words.length === 0) return "_";
  const [first = "", ...rest] = words;
  const camel = lowerLeadingCapitals(first) + rest.map((word) => word.charAt(0).toUpperCase() + word.slice(1)).join("");
  return /^[\p{ID_Start}$_]/u.test(camel) ? camel : `_${camel}`;
}

/** `WebSearch` → `webSearch`, `HTTPGet` → `httpGet`, `URL` → `url`. */
function lowerLeadingCapitals(word: string): string {
  const capitals = /^\p{Lu}+/u.exec(word)?.[0].length ?? 0;
  if (capitals === word.length) return word.toLowerCase();
  if (capitals <= 1) return word.charAt(0).toLowerCase() + word.slice(1);
  // `HTTPGet`: the last capital starts the next word.
  return word.slice(0, capitals - 1).toLowerCase() + word.slice(capitals - 1);
}

/** Renders `declare const tools: { ... }` with one documented method per tool. */
export function renderToolSignatures(tools: readonly ToolSignatureInput[]): string {
  return `declare const tools: {\n${tools.map(cachedMember).join("\n")}\n};`;
}

/**
 * Rendered members by a hash of everything they show (name, description, JSON schema): the tools
 * offered change per turn, and a tool keeping its name may change its schema.
 */
const memberCache = new Map<string, string>();
const MEMBER_CACHE_SIZE = 512;

function cachedMember(tool: ToolSignatureInput): string {
  let key: string;
  try {
    key = createHash("sha256")
      .update(JSON.stringify([tool.name, tool.camelName, tool.description, tool.schema]))
      .digest("base64");
  } catch {
    // A schema JSON cannot hold (a cycle, a BigInt) is rendered every time.
    return renderMember(tool);
  }
  let member = memberCache.get(key);
  if (member === undefined) {
    member = renderMember(tool);
    if (memberCache.size >= MEMBER_CACHE_SIZE) memberCache.delete(memberCache.keys().next().value as string);
    memberCache.set(key, member);
  }
  return member;
}

function renderMember(tool: ToolSignatureInput): string {
  const root = typeof tool.schema === "object" ? tool.schema : {};
  const context: RenderContext = { root, refStack: [], depth: 0 };
  const optional = typeof tool.schema !== "object" || !hasRequiredInput(root);
  const input = renderType(tool.schema, context, 1);
  const doc = docComment([tool.description.trim(), `Tool name: ${tool.name}`], "  ");
  return `${doc}  ${tool.camelName}(input${optional ? "?" : ""}: ${input}): Promise<unknown>;`;
}

interface RenderContext {
  root: JSONSchemaObject;
  /** `$ref`s being expanded, to stop on recursive schemas. */
  refStack: string[];
  /** Nesting of the schema being rendered, capped so hostile schemas stay cheap. */
  depth: number;
}

const MAX_DEPTH = 12;
const IDENTIFIER = /^[\p{ID_Start}$_][\p{ID_Continue}$]*$/u;

function hasRequiredInput(schema: JSONSchemaObject): boolean {
  return (schema.required?.length ?? 0) > 0 || (schema.type !== undefined && schema.type !== "object");
}

/** Renders a schema as a type; `indent` is the nesting of object literals, for layout only. */
function renderType(schema: JSONSchema | undefined, context: RenderContext, indent: number): string {
  if (schema === undefined || schema === true) return "unknown";
  if (schema === false) return "never";
  if (context.depth >= MAX_DEPTH) return "unknown";
  context.depth++;
  try {
    const type = renderTypeWithoutNull(schema, context, indent);
    return schema.nullable === true && type !== "unknown" ? union([type, "null"]) : type;
  } finally {
    context.depth--;
  }
}

function renderTypeWithoutNull(schema: JSONSchemaObject, context: RenderContext, indent: number): string {
  if (typeof schema.$ref === "string") return renderRef(schema.$ref, context, indent);
  if ("const" in schema) return literal(schema.const);
  if (Array.isArray(schema.enum)) return union(schema.enum.map(literal));
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alternatives))
    return union(alternatives.map((alternative) => renderType(alternative, context, indent)));
  if (Array.isArray(schema.allOf)) {
    const parts = [...new Set(schema.allOf.map((part) => renderType(part, context, indent)))].filter(
      (part) => part !== "unknown",
    );
    return parts.length === 0 ? "unknown" : parts.map(parenthesize).join(" & ");
  }
  const types = Array.isArray(schema.type)
    ? schema.type
    : schema.type === undefined
      ? inferredTypes(schema)
      : [schema.type];
  if (types.length === 0) return "unknown";
  return union(types.map((type) => renderSingleType(type, schema, context, indent)));
}

function inferredTypes(schema: JSONSchemaObject): string[] {
  if (schema.properties !== undefined || schema.additionalProperties !== undefined) return ["object"];
  if (schema.items !== undefined || schema.prefixItems !== undefined) return ["array"];
  return [];
}

function renderSingleType(type: string, schema: JSONSchemaObject, context: RenderContext, indent: number): string {
  switch (type) {
    case "string":
    case "boolean":
    case "null":
      return type;
    case "number":
    case "integer":
      return "number";
    case "array":
      return renderArray(schema, context, indent);
    case "object":
      return renderObject(schema, context, indent);
    default:
      return "unknown";
  }
}

function renderArray(schema: JSONSchemaObject, context: RenderContext, indent: number): string {
  const tuple = schema.prefixItems ?? (Array.isArray(schema.items) ? schema.items : undefined);
  if (tuple) return `[${tuple.map((item) => renderType(item, context, indent)).join(", ")}]`;
  const item = renderType(schema.items as JSONSchema | undefined, context, indent);
  return /^[\w$.]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
}

function renderObject(schema: JSONSchemaObject, context: RenderContext, indent: number): string {
  const properties = Object.entries(schema.properties ?? {});
  const extra = schema.additionalProperties;
  if (properties.length === 0) {
    if (extra === undefined || extra === true) return "Record<string, unknown>";
    if (extra === false) return "{}";
    return `Record<string, ${renderType(extra, context, indent)}>`;
  }
  const pad = "  ".repeat(indent + 1);
  const required = new Set(schema.required ?? []);
  const lines = properties.map(([key, property]) => {
    const name = IDENTIFIER.test(key) ? key : JSON.stringify(key);
    const doc = typeof property === "object" ? docComment(propertyNotes(property), pad) : "";
    return `${doc}${pad}${name}${required.has(key) ? "" : "?"}: ${renderType(property, context, indent + 1)};`;
  });
  if (extra !== undefined && extra !== false)
    lines.push(`${pad}[key: string]: ${extra === true ? "unknown" : renderType(extra, context, indent + 1)};`);
  return `{\n${lines.join("\n")}\n${"  ".repeat(indent)}}`;
}

function renderRef(ref: string, context: RenderContext, indent: number): string {
  const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  const name = match?.[2]?.replace(/~1/g, "/").replace(/~0/g, "~");
  const table = match?.[1] === "$defs" ? context.root.$defs : context.root.definitions;
  const target = name === undefined ? (ref === "#" ? context.root : undefined) : table?.[name];
  // Recursive schemas stop at `unknown`: the signature stays finite.
  if (target === undefined || context.refStack.includes(ref)) return "unknown";
  context.refStack.push(ref);
  try {
    return renderType(target, context, indent);
  } finally {
    context.refStack.pop();
  }
}

/** What a property's doc comment says: its description and the constraints a caller must meet. */
function propertyNotes(schema: JSONSchemaObject): string[] {
  const notes: string[] = [];
  if (typeof schema.description === "string" && schema.description.trim() !== "") notes.push(schema.description.trim());
  const constraints: string[] = [];
  for (const keyword of [
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
  ]) {
    const value = schema[keyword];
    // zod gives every integer ±(2^53 - 1) bounds: they say nothing a caller must meet.
    if (typeof value === "number" && Math.abs(value) >= Number.MAX_SAFE_INTEGER) continue;
    if (typeof value === "string" || typeof value === "number")
      constraints.push(
        `${keyword}: ${typeof value === "string" && keyword === "pattern" ? JSON.stringify(value) : value}`,
      );
  }
  if (constraints.length > 0) notes.push(constraints.join(", "));
  if (schema.default !== undefined) notes.push(`@default ${safeJson(schema.default)}`);
  return notes;
}

function docComment(notes: readonly string[], indent: string): string {
  const lines = notes.filter((note) => note !== "").flatMap((note) => note.split(/\r?\n/));
  if (lines.length === 0) return "";
  // `*/` inside a description would end the comment and turn the rest into code.
  const body = lines.map((line) => `${indent} *${line === "" ? "" : " "}${line.replace(/\*\//g, "*\\/")}`.trimEnd());
  if (body.length === 1) return `${indent}/** ${lines[0]?.replace(/\*\//g, "*\\/")} */\n`;
  return `${indent}/**\n${body.join("\n")}\n${indent} */\n`;
}

function literal(value: unknown): string {
  if (value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean")
    return JSON.stringify(value);
  return "unknown";
}

function union(types: readonly string[]): string {
  const unique = [...new Set(types)];
  if (unique.includes("unknown")) return "unknown";
  return unique.length === 0 ? "never" : unique.map(parenthesizeInUnion).join(" | ");
}

function parenthesizeInUnion(type: string): string {
  return type.includes(" & ") && !type.startsWith("{") ? `(${type})` : type;
}

function parenthesize(type: string): string {
  return type.includes(" | ") && !type.startsWith("{") ? `(${type})` : type;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
