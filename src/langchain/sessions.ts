/**
 * Interpreter sessions: one per LangGraph thread (or one per middleware instance without a
 * thread id), each owning at most one live resource (a sandbox), with evals of a session run one
 * after another, least-recently-used eviction over a cap, and idle eviction.
 *
 * Generic over the resource so the policy here knows nothing about sandboxes or tools.
 */

/** How a registry opens and closes the resource of a session, and what else a session carries. */
export interface SessionRegistryOptions<R, S, C = undefined> {
  /** Most sessions kept at once; beyond it the least recently used idle session is closed. */
  maxLiveSessions: number;
  /** A session unused for this long (and not running anything) is closed. */
  idleTimeoutMs: number;
  /** Creates the resource of a session, lazily, on first use. */
  open: (session: InterpreterSession<R, S, C>) => R;
  /** Releases a resource; must not throw. */
  close: (resource: R) => void;
  /** Creates the per-session state that survives resource resets (e.g. the tools view), given the creating run's `context`. */
  initState: (context: C | undefined) => S;
  /** Clock, ms. Default `performance.now`. */
  now?: () => number;
}

/** Why a session's resource was closed by the registry rather than by its user. */
export type EvictionReason = "idle" | "capacity";

/** One session: a key, a lazily opened resource and a queue of work. */
export class InterpreterSession<R, S, C = undefined> {
  readonly key: string;
  /** Per-session state kept across resets of the resource. */
  readonly state: S;
  #resource: R | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #pending = 0;
  #lastUsedAt: number;
  readonly #registry: SessionRegistry<R, S, C>;

  /** @internal */
  constructor(registry: SessionRegistry<R, S, C>, key: string, state: S, now: number) {
    this.#registry = registry;
    this.key = key;
    this.state = state;
    this.#lastUsedAt = now;
  }

  /** The live resource, opened on first access. */
  get resource(): R {
    this.#resource ??= this.#registry.openFor(this);
    return this.#resource;
  }

  /** True when a resource is open. */
  get isOpen(): boolean {
    return this.#resource !== undefined;
  }

  /** Tasks queued or running. */
  get pending(): number {
    return this.#pending;
  }

  get lastUsedAt(): number {
    return this.#lastUsedAt;
  }

  /** Closes the resource now; the next access opens a fresh one. Call only from inside a task. */
  discard(): void {
    const resource = this.#resource;
    this.#resource = undefined;
    if (resource !== undefined) this.#registry.closeResource(resource);
  }

  /** @internal Queues `task` after every earlier task of this session. */
  enqueue<T>(task: (session: InterpreterSession<R, S, C>) => Promise<T>, now: () => number): Promise<T> {
    this.#pending++;
    const run = this.#tail.then(() => task(this));
    this.#tail = run.then(
      () => this.#settled(now()),
      () => this.#settled(now()),
    );
    return run;
  }

  #settled(at: number): void {
    this.#pending--;
    this.#lastUsedAt = at;
  }
}

/** Sessions by key, with queueing, LRU capacity and idle eviction. */
export class SessionRegistry<R, S, C = undefined> {
  readonly #sessions = new Map<string, InterpreterSession<R, S, C>>();
  readonly #options: SessionRegistryOptions<R, S, C>;
  readonly #now: () => number;
  readonly #evicted = new Map<string, EvictionReason>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #disposed = false;

  constructor(options: SessionRegistryOptions<R, S, C>) {
    this.#options = options;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Number of sessions held (open or not). */
  get size(): number {
    return this.#sessions.size;
  }

  /** Keys of the sessions held, least recently used first. */
  keys(): string[] {
    return [...this.#sessions.keys()];
  }

  /** The session for `key`, if held. */
  get(key: string): InterpreterSession<R, S, C> | undefined {
    return this.#sessions.get(key);
  }

  /**
   * Runs `task` on the session for `key` (created if needed) after every earlier task of that
   * session has settled. Tasks of different sessions run concurrently.
   */
  run<T>(key: string, task: (session: InterpreterSession<R, S, C>) => Promise<T>, context?: C): Promise<T> {
    if (this.#disposed) return Promise.reject(new Error("The code interpreter has been disposed"));
    const session = this.#touch(key, context);
    return session.enqueue(task, this.#now);
  }

  /** Closes the resource of `key` once its queued work is done; a no-op for unknown keys. */
  discard(key: string): Promise<void> {
    const session = this.#sessions.get(key);
    if (session === undefined) return Promise.resolve();
    return session.enqueue(async (s) => s.discard(), this.#now);
  }

  /**
   * Why the session of `key` lost its resource to eviction since the last call, if it did;
   * reading clears it, so the caller can tell the model once.
   */
  takeEviction(key: string): EvictionReason | undefined {
    const reason = this.#evicted.get(key);
    this.#evicted.delete(key);
    return reason;
  }

  /** Closes sessions idle for longer than `idleTimeoutMs`. Runs periodically on its own; public for tests. */
  sweep(): void {
    const cutoff = this.#now() - this.#options.idleTimeoutMs;
    for (const session of [...this.#sessions.values()]) {
      if (session.pending === 0 && session.lastUsedAt <= cutoff) this.#evict(session, "idle");
    }
    if (this.#sessions.size === 0) this.#stopTimer();
  }

  /** Closes every session. Later `run` calls reject. Idempotent. */
  dispose(): void {
    this.#disposed = true;
    this.#stopTimer();
    for (const session of this.#sessions.values()) session.discard();
    this.#sessions.clear();
    this.#evicted.clear();
  }

  /** @internal */
  openFor(session: InterpreterSession<R, S, C>): R {
    if (this.#disposed) throw new Error("The code interpreter has been disposed");
    return this.#options.open(session);
  }

  /** @internal */
  closeResource(resource: R): void {
    this.#options.close(resource);
  }

  #touch(key: string, context: C | undefined): InterpreterSession<R, S, C> {
    let session = this.#sessions.get(key);
    if (session !== undefined) {
      // Re-inserting moves the key to the most-recently-used end of the Map's order.
      this.#sessions.delete(key);
    } else {
      session = new InterpreterSession(this, key, this.#options.initState(context), this.#now());
    }
    this.#sessions.set(key, session);
    this.#enforceCapacity(session);
    this.#startTimer();
    return session;
  }

  #enforceCapacity(keep: InterpreterSession<R, S, C>): void {
    let excess = this.#sessions.size - this.#options.maxLiveSessions;
    if (excess <= 0) return;
    // Oldest first; busy sessions are skipped, so the cap may be exceeded while all are busy.
    for (const session of [...this.#sessions.values()]) {
      if (excess <= 0) break;
      if (session.pending > 0 || session === keep) continue;
      this.#evict(session, "capacity");
      excess--;
    }
  }

  #evict(session: InterpreterSession<R, S, C>, reason: EvictionReason): void {
    if (session.isOpen) this.#evicted.set(session.key, reason);
    session.discard();
    this.#sessions.delete(session.key);
    // Bound the notices too: a key that never comes back must not pin memory forever.
    if (this.#evicted.size > this.#options.maxLiveSessions * 4) {
      const oldest = this.#evicted.keys().next();
      if (!oldest.done) this.#evicted.delete(oldest.value);
    }
  }

  #startTimer(): void {
    if (this.#timer !== undefined) return;
    const period = Math.max(250, Math.min(this.#options.idleTimeoutMs / 2, 60_000));
    this.#timer = setInterval(() => this.sweep(), period);
    // Idle eviction must never keep the process alive.
    this.#timer.unref();
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
