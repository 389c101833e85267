/** Stable codes of every error the engine raises. */
export type SandboxErrorCode =
  | "SYNTAX_ERROR"
  | "GUEST_ERROR"
  | "TIMEOUT"
  | "OUT_OF_MEMORY"
  | "STACK_OVERFLOW"
  | "ABORTED"
  | "DISPOSED"
  | "BUSY"
  | "BROKEN"
  | "UNSERIALIZABLE"
  | "COPY_LIMIT"
  | "HOST_CALL_LIMIT"
  | "INVALID_ARGUMENT"
  | "INVALID_SNAPSHOT"
  /** The helper process of an `isolation: "process"` sandbox died; the sandbox is broken. */
  | "WORKER_LOST";

/** Which budget ran out, for `TIMEOUT` errors. */
export type TimeoutBudget = "execution" | "wall";

/** What the guest threw, copied out of the sandbox. */
export interface GuestErrorInfo {
  /** `name` of the thrown Error, or the type of a thrown non-Error (`"string"`, `"number"`...). */
  name: string;
  /** The Error's message, or the thrown value itself rendered as text (`throw "x"` gives `x`). */
  message: string;
  /** Guest stack trace, when the thrown value had one. */
  stack?: string;
  /** True when the guest threw something that is not an Error object. */
  nonError?: boolean;
}

/** The one error class of quickjs-native. Switch on {@link SandboxError.code}. */
export class SandboxError extends Error {
  override readonly name = "SandboxError";
  readonly code: SandboxErrorCode;
  /** For `GUEST_ERROR` and `SYNTAX_ERROR`: what the guest threw. */
  readonly guest?: GuestErrorInfo;
  /** For `TIMEOUT`: which budget ran out. */
  readonly budget?: TimeoutBudget;

  constructor(
    code: SandboxErrorCode,
    message: string,
    details: { guest?: GuestErrorInfo; budget?: TimeoutBudget; cause?: unknown } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    if (details.guest) this.guest = details.guest;
    if (details.budget) this.budget = details.budget;
  }
}

/** True when `err` is a {@link SandboxError}, optionally with the given code. */
export function isSandboxError(err: unknown, code?: SandboxErrorCode): err is SandboxError {
  return err instanceof SandboxError && (code === undefined || err.code === code);
}
