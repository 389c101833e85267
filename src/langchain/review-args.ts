/**
 * What a reviewer is shown of a reviewed call's arguments is their JSON text, so a reviewed call
 * runs only with arguments JSON shows exactly: plain objects and arrays of strings, booleans, null
 * and finite numbers. A `Set` shows as `{}`, `NaN` as `null`, `-0` as `0`, an `undefined` field not
 * at all, yet the tool would get them as they are: such arguments are refused before the review.
 * What the reviewer answers is checked here too, and the HITL request a reviewed call raises is
 * built here; so are the clock and seed a replayable eval is pinned to.
 */
import { createHash, randomInt } from "node:crypto";
import type { Decision, HITLRequest } from "langchain";
import type { SandboxClock } from "../index.js";
import type { HostCallRequest } from "./journal.js";
import type { ResolvedReview } from "./options.js";
import { APPROVAL_TEXT } from "./prompts.js";

/** The review of a call the journal says paused, when the configuration no longer lists its tool. */
export const EVERY_DECISION: ResolvedReview = {
  allowedDecisions: ["approve", "edit", "reject"],
  description: undefined,
  argsSchema: undefined,
  when: undefined,
};

/** Where and what the first part of `args` that JSON cannot show faithfully is, or `undefined` when there is none. */
export function unfaithfulPartOf(args: Record<string, unknown>): string | undefined {
  return walk(args, "args", new Set());
}

function walk(value: unknown, path: string, open: Set<object>): string | undefined {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      if (!Number.isFinite(value)) return `${path} is ${value}`;
      return Object.is(value, -0) ? `${path} is -0` : undefined;
    case "object":
      return value === null ? undefined : walkObject(value, path, open);
    default:
      return `${path} is ${typeof value === "undefined" ? "undefined" : `a ${typeof value}`}`;
  }
}

function walkObject(value: object, path: string, open: Set<object>): string | undefined {
  if (open.has(value)) return `${path} refers back to itself`;
  const isArray = Array.isArray(value);
  const proto: unknown = Object.getPrototypeOf(value);
  if (!isArray && proto !== Object.prototype && proto !== null) return `${path} is ${kindOf(value)}`;
  if (isArray && proto !== Array.prototype) return `${path} is ${kindOf(value)}`;
  if (Object.getOwnPropertySymbols(value).length > 0) return `${path} has symbol keys`;
  const keys = Object.keys(value);
  if (isArray && keys.length !== value.length) return `${path} is an array with holes or extra properties`;
  open.add(value);
  try {
    for (const key of keys) {
      const descriptor = Object.getOwnPropertyDescriptor(value, key)!;
      const at = isArray
        ? `${path}[${key}]`
        : `${path}${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`;
      if (!("value" in descriptor)) return `${at} is an accessor`;
      const problem = walk(descriptor.value, at, open);
      if (problem !== undefined) return problem;
    }
  } finally {
    open.delete(value);
  }
  return undefined;
}

function kindOf(value: object): string {
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  const name = tag === "Object" ? ((value as { constructor?: { name?: unknown } }).constructor?.name ?? "Object") : tag;
  const noun = typeof name === "string" && name !== "" ? name : "non-plain object";
  return `${/^[AEIO]/i.test(noun) ? "an" : "a"} ${noun}`;
}

/** The reviewer's decision in `resume`; throws a `TypeError` saying what is wrong. */
export function decisionOf(request: HostCallRequest, review: ResolvedReview, resume: unknown): Decision {
  const decisions = (resume as { decisions?: unknown } | null | undefined)?.decisions;
  if (!Array.isArray(decisions) || decisions.length !== 1) {
    throw new TypeError(APPROVAL_TEXT.badResume(request.name, decisions));
  }
  const decision = decisions[0] as Decision | undefined;
  const type = decision?.type;
  if (decision === undefined || !review.allowedDecisions.includes(type!))
    throw new TypeError(APPROVAL_TEXT.notAllowed(request.name, type, review.allowedDecisions));
  if (decision.type === "edit") {
    const edited = decision.editedAction as { name?: unknown; args?: unknown } | undefined;
    if (edited?.name !== request.name) throw new TypeError(APPROVAL_TEXT.editRenames(request.name, edited?.name));
    if (typeof edited.args !== "object" || edited.args === null || Array.isArray(edited.args))
      throw new TypeError(APPROVAL_TEXT.editArgs(request.name));
  }
  if (decision.type === "reject" && decision.message !== undefined && typeof decision.message !== "string")
    throw new TypeError(APPROVAL_TEXT.rejectMessage(request.name));
  return decision;
}

/** The HITL request a reviewed call raises: what the reviewer is shown, and may decide. */
export async function hitlRequestOf(
  request: HostCallRequest,
  review: ResolvedReview,
  toolCall: { name: string; args: Record<string, unknown>; id: string; type: "tool_call" },
  context: { state: unknown; runtime: unknown; descriptionPrefix: string },
): Promise<HITLRequest> {
  const description =
    typeof review.description === "function"
      ? await review.description(toolCall as never, context.state as never, context.runtime as never)
      : (review.description ??
        `${context.descriptionPrefix}\n\nTool: ${request.name}\nArgs: ${JSON.stringify(request.args, null, 2)}`);
  return {
    actionRequests: [{ name: request.name, args: request.args, description }],
    reviewConfigs: [
      {
        actionName: request.name,
        allowedDecisions: [...review.allowedDecisions],
        ...(review.argsSchema === undefined ? {} : { argsSchema: review.argsSchema }),
      },
    ],
  };
}

/** The guest clock a replayable eval is pinned to (ms since the epoch); `undefined` with the real clock. */
export function freshClock(clock: SandboxClock): number | undefined {
  if (clock === "real") return undefined;
  return clock === "frozen" ? Date.now() : clock.now();
}

/** The `Math.random` seed a replayable eval is pinned to. */
export function freshSeed(configured: number | undefined, evalCallId: string): number {
  if (configured === undefined) return randomInt(2 ** 48 - 1);
  // Reproducible runs stay reproducible: the seed of each eval follows from the configured one.
  return createHash("sha256").update(`${configured}:${evalCallId}`).digest().readUIntLE(0, 6);
}
