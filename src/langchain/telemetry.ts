/**
 * What the agent layer adds to the engine's telemetry: the eval tool's own span (GenAI
 * `execute_tool`, with the session key hashed) and the tenant each eval's usage is attributed to.
 */
import { MAX_TENANT_CHARS, TIER, traceActive, telemetryKeyHash } from "../index.js";
import type { ResolvedOptions } from "./options.js";
import type { EvalRunConfig } from "./ptc.js";

/** The eval's `tenant` option: `usageTenant(config)`, or the run's thread id. */
export function tenantOf(options: ResolvedOptions, config: EvalRunConfig): { tenant?: string } {
  const configurable = config.configurable as Record<string, unknown> | undefined;
  const tenant =
    options.usageTenant === undefined
      ? configurable?.thread_id
      : options.usageTenant({ ...(configurable === undefined ? {} : { configurable }) });
  return typeof tenant === "string" ? { tenant: tenant.slice(0, MAX_TENANT_CHARS) } : {};
}

/** Runs one eval tool call in its span (when OpenTelemetry is present): GenAI `execute_tool`. */
export function traceEvalTool<T>(
  toolName: string,
  config: EvalRunConfig,
  sessionKey: string,
  run: () => Promise<T>,
): Promise<T> {
  const attributes: Record<string, string> = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": toolName,
    "gen_ai.tool.type": "function",
    "quickjs_native.tier": TIER,
    "quickjs_native.session.hash": telemetryKeyHash(sessionKey),
  };
  const callId = config.toolCall?.id ?? config.toolCallId;
  if (callId !== undefined) attributes["gen_ai.tool.call.id"] = callId;
  return traceActive(`execute_tool ${toolName}`, attributes, run);
}
