import { afterEach, describe, expect, it } from "vitest";
import { SessionRegistry } from "../../src/langchain/sessions.js";

/** A resource that records its own lifecycle, so tests observe opens and closes. */
interface Probe {
  id: number;
  closed: boolean;
}

function makeRegistry(opts: { maxLiveSessions?: number; idleTimeoutMs?: number } = {}) {
  let clock = 0;
  let ids = 0;
  const opened: Probe[] = [];
  const registry = new SessionRegistry<Probe, { note: string }>({
    maxLiveSessions: opts.maxLiveSessions ?? 8,
    idleTimeoutMs: opts.idleTimeoutMs ?? 10_000,
    open: () => {
      const p = { id: ++ids, closed: false };
      opened.push(p);
      return p;
    },
    close: (p) => {
      p.closed = true;
    },
    initState: () => ({ note: "" }),
    now: () => clock,
  });
  return {
    registry,
    opened,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

let current: SessionRegistry<Probe, { note: string }> | undefined;
afterEach(() => current?.dispose());

describe("interpreter sessions", () => {
  it("one thread's evals run one at a time, in arrival order", async () => {
    const { registry } = makeRegistry();
    current = registry;
    const log: string[] = [];
    const gate = deferred();
    const first = registry.run("t1", async () => {
      log.push("a:start");
      await gate.promise;
      log.push("a:end");
    });
    const second = registry.run("t1", async () => {
      log.push("b");
    });
    await new Promise((r) => setTimeout(r, 10));
    expect(log).toEqual(["a:start"]);
    gate.resolve();
    await Promise.all([first, second]);
    expect(log).toEqual(["a:start", "a:end", "b"]);
  });

  it("different threads run concurrently and get distinct resources", async () => {
    const { registry } = makeRegistry();
    current = registry;
    const gate = deferred();
    const seen: number[] = [];
    const a = registry.run("t1", async (s) => {
      seen.push(s.resource.id);
      await gate.promise;
    });
    const b = registry.run("t2", async (s) => {
      seen.push(s.resource.id);
    });
    await b; // t2 finished although t1 is still blocked
    gate.resolve();
    await a;
    expect(new Set(seen).size).toBe(2);
  });

  it("a failing eval does not block the next one on the same thread", async () => {
    const { registry } = makeRegistry();
    current = registry;
    await expect(registry.run("t", async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(registry.run("t", async () => "ok")).resolves.toBe("ok");
  });

  it("the resource is opened lazily and kept across evals of a session", async () => {
    const { registry, opened } = makeRegistry();
    current = registry;
    await registry.run("t", async () => undefined);
    expect(opened).toHaveLength(0);
    const id1 = await registry.run("t", async (s) => s.resource.id);
    const id2 = await registry.run("t", async (s) => s.resource.id);
    expect(id1).toBe(id2);
    expect(opened).toHaveLength(1);
  });

  it("discard closes the resource and the next eval gets a fresh one, keeping session state", async () => {
    const { registry, opened } = makeRegistry();
    current = registry;
    await registry.run("t", async (s) => {
      s.state.note = "kept";
      return s.resource.id;
    });
    await registry.discard("t");
    expect(opened[0]?.closed).toBe(true);
    const [id, note] = await registry.run("t", async (s) => [s.resource.id, s.state.note] as const);
    expect(id).toBe(2);
    expect(note).toBe("kept");
  });

  it("discard waits for the eval in progress instead of closing its sandbox under it", async () => {
    const { registry, opened } = makeRegistry();
    current = registry;
    const gate = deferred();
    const running = registry.run("t", async (s) => {
      void s.resource;
      await gate.promise;
      return opened[0]?.closed;
    });
    const discarded = registry.discard("t");
    gate.resolve();
    expect(await running).toBe(false);
    await discarded;
    expect(opened[0]?.closed).toBe(true);
  });

  it("beyond maxLiveSessions the least recently used idle session is closed", async () => {
    const { registry, opened } = makeRegistry({ maxLiveSessions: 2 });
    current = registry;
    for (const key of ["a", "b"]) await registry.run(key, async (s) => s.resource);
    await registry.run("a", async () => undefined); // a is now more recent than b
    await registry.run("c", async (s) => s.resource);
    expect(registry.keys().sort()).toEqual(["a", "c"]);
    expect(opened.map((p) => p.closed)).toEqual([false, true, false]);
    expect(registry.takeEviction("b")).toBe("capacity");
    expect(registry.takeEviction("b")).toBeUndefined();
  });

  it("a busy session is never evicted for capacity", async () => {
    const { registry, opened } = makeRegistry({ maxLiveSessions: 1 });
    current = registry;
    const gate = deferred();
    const busy = registry.run("a", async (s) => {
      void s.resource;
      await gate.promise;
    });
    await registry.run("b", async (s) => s.resource);
    expect(opened[0]?.closed).toBe(false);
    gate.resolve();
    await busy;
    await registry.run("c", async () => undefined);
    expect(registry.size).toBe(1);
  });

  it("sessions idle past the timeout are closed by the sweep; recent and busy ones stay", async () => {
    const { registry, opened, advance } = makeRegistry({ idleTimeoutMs: 1000 });
    current = registry;
    await registry.run("old", async (s) => s.resource);
    advance(600);
    await registry.run("recent", async (s) => s.resource);
    const gate = deferred();
    const busy = registry.run("busy", async (s) => {
      void s.resource;
      await gate.promise;
    });
    advance(600);
    registry.sweep();
    expect(registry.keys().sort()).toEqual(["busy", "recent"]);
    expect(opened[0]?.closed).toBe(true);
    expect(registry.takeEviction("old")).toBe("idle");
    advance(5000);
    registry.sweep();
    expect(registry.keys()).toEqual(["busy"]);
    gate.resolve();
    await busy;
  });

  it("dispose closes every resource and refuses later work", async () => {
    const { registry, opened } = makeRegistry();
    await registry.run("a", async (s) => s.resource);
    await registry.run("b", async (s) => s.resource);
    registry.dispose();
    registry.dispose();
    expect(opened.every((p) => p.closed)).toBe(true);
    await expect(registry.run("a", async () => 1)).rejects.toThrow(/disposed/);
  });
});
