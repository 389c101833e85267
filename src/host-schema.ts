/**
 * Typed host functions: arguments checked by a schema of the Standard Schema interface
 * (https://standardschema.dev: zod 3.24+ and 4, valibot, ArkType...), read structurally, so no
 * schema library is a dependency of the engine.
 */
import type { HostCallContext } from "./types.js";

/** One problem a schema found. */
export interface SchemaIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** What a schema's `validate` returns: the parsed value, or the issues. */
export type SchemaResult<T> =
  | { readonly value: T; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<SchemaIssue> };

/**
 * A Standard Schema for the argument list of a host function, such as zod's
 * `z.tuple([z.string(), z.number()])`: the function then receives the parsed, typed arguments.
 */
export interface ArgumentsSchema<Args extends unknown[]> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => SchemaResult<Args> | Promise<SchemaResult<Args>>;
    readonly types?: { readonly input: unknown; readonly output: Args } | undefined;
  };
}

/** Longest description of a schema's issues thrown into the guest. */
const MAX_ISSUES_CHARS = 1000;

function rejected(name: string, issues: ReadonlyArray<SchemaIssue>): TypeError {
  const text = issues
    .map((issue) => {
      const path = (issue.path ?? [])
        .map((segment) => String(typeof segment === "object" ? segment.key : segment))
        .join(".");
      return path === "" ? issue.message : `${path}: ${issue.message}`;
    })
    .join("; ");
  return new TypeError(
    `invalid arguments to ${name}(): ${text.length > MAX_ISSUES_CHARS ? `${text.slice(0, MAX_ISSUES_CHARS)}...` : text}`,
  );
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** A synchronous host function that checks its arguments with `schema` (a synchronous one) before `fn` runs. */
export function checkedFunction<Args extends unknown[]>(
  name: string,
  schema: ArgumentsSchema<Args>,
  fn: (...args: Args) => unknown,
): (...args: unknown[]) => unknown {
  return (...args: unknown[]) => {
    const result = schema["~standard"].validate(args);
    if (isThenable(result))
      throw new TypeError(`${name}(): its arguments schema is asynchronous; define it with defineAsyncFunction`);
    if (result.issues !== undefined) throw rejected(name, result.issues);
    return fn(...result.value);
  };
}

/** An asynchronous host function that checks its arguments with `schema` before `fn` runs. */
export function checkedAsyncFunction<Args extends unknown[]>(
  name: string,
  schema: ArgumentsSchema<Args>,
  fn: (args: Args, context: HostCallContext) => unknown,
): (args: unknown[], context: HostCallContext) => Promise<unknown> {
  return async (args, context) => {
    const result = await schema["~standard"].validate(args);
    if (result.issues !== undefined) throw rejected(name, result.issues);
    return fn(result.value, context);
  };
}
