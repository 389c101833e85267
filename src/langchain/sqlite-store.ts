/**
 * A LangGraph `BaseStore` in one SQLite file (better-sqlite3), for the embedded setup: with
 * `SqliteSaver` as the checkpointer it keeps a thread's interpreter state without any server.
 * Supports get, put, delete, search by namespace prefix with `filter` (exact values and
 * `$eq $ne $gt $gte $lt $lte` on top-level fields), `limit` and `offset`, and `listNamespaces`.
 * Semantic search (`query`) needs a vector index this store does not have: it throws.
 */
import { createRequire } from "node:module";
import {
  BaseStore,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchOperation,
} from "@langchain/langgraph";

type SearchItem = Awaited<ReturnType<BaseStore["search"]>>[number];

/** The part of better-sqlite3 this store uses. */
interface SqliteStatement {
  run(...params: unknown[]): unknown;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}
interface SqliteDatabase {
  exec(sql: string): unknown;
  prepare(sql: string): SqliteStatement;
  pragma(sql: string): unknown;
  close(): void;
}

interface Row {
  namespace: string;
  key: string;
  value: string;
  created_at: number;
  updated_at: number;
}

/** Namespace labels joined by a byte that cannot occur in them, so a prefix is a string range. */
const SEPARATOR = "\u0001";

function encodeNamespace(namespace: readonly string[]): string {
  if (namespace.some((label) => typeof label !== "string" || label.length === 0 || label.includes(SEPARATOR))) {
    throw new TypeError(`invalid namespace ${JSON.stringify(namespace)}: labels must be non-empty strings`);
  }
  return namespace.join(SEPARATOR);
}

function itemOf(row: Row): Item {
  return {
    namespace: row.namespace.split(SEPARATOR),
    key: row.key,
    value: JSON.parse(row.value) as Record<string, unknown>,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function matches(value: Record<string, unknown>, filter: Record<string, unknown>): boolean {
  return Object.entries(filter).every(([field, condition]) => {
    const actual = value[field];
    if (typeof condition !== "object" || condition === null) return actual === condition;
    return Object.entries(condition as Record<string, unknown>).every(([op, expected]) => {
      switch (op) {
        case "$eq":
          return actual === expected;
        case "$ne":
          return actual !== expected;
        case "$gt":
          return (actual as number) > (expected as number);
        case "$gte":
          return (actual as number) >= (expected as number);
        case "$lt":
          return (actual as number) < (expected as number);
        case "$lte":
          return (actual as number) <= (expected as number);
        default:
          throw new TypeError(`unsupported filter operator ${op}`);
      }
    });
  });
}

function pathMatches(namespace: readonly string[], path: readonly string[], at: "prefix" | "suffix"): boolean {
  if (path.length > namespace.length) return false;
  const offset = at === "prefix" ? 0 : namespace.length - path.length;
  return path.every((label, i) => label === "*" || label === namespace[offset + i]);
}

/** A `BaseStore` kept in a SQLite file (or `":memory:"`). */
export class SqliteStore extends BaseStore {
  readonly #db: SqliteDatabase;
  readonly #get: SqliteStatement;
  readonly #put: SqliteStatement;
  readonly #delete: SqliteStatement;
  readonly #range: SqliteStatement;
  readonly #namespaces: SqliteStatement;

  /** Opens (creating when needed) the store in `path`. Requires the `better-sqlite3` package. */
  constructor(path: string) {
    super();
    const Database = createRequire(import.meta.url)("better-sqlite3") as new (path: string) => SqliteDatabase;
    this.#db = new Database(path);
    this.#db.pragma("journal_mode = WAL");
    this.#db.exec(`CREATE TABLE IF NOT EXISTS store (
      namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
      created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (namespace, key))`);
    this.#get = this.#db.prepare("SELECT * FROM store WHERE namespace = ? AND key = ?");
    this.#put =
      this.#db.prepare(`INSERT INTO store (namespace, key, value, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`);
    this.#delete = this.#db.prepare("DELETE FROM store WHERE namespace = ? AND key = ?");
    this.#range = this.#db.prepare(
      "SELECT * FROM store WHERE (namespace = ? OR (namespace >= ? AND namespace < ?)) ORDER BY updated_at DESC, namespace, key",
    );
    this.#namespaces = this.#db.prepare("SELECT DISTINCT namespace FROM store ORDER BY namespace");
  }

  /** Runs the operations in order, in one transaction. */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    this.#db.exec("BEGIN");
    try {
      for (const op of operations) results.push(this.#run(op));
      this.#db.exec("COMMIT");
    } catch (error) {
      this.#db.exec("ROLLBACK");
      throw error;
    }
    return results as OperationResults<Op>;
  }

  #run(op: Operation): unknown {
    if ("namespacePrefix" in op) return this.#search(op);
    if (!("key" in op)) return this.#listNamespaces(op);
    if ("value" in op) return this.#write(op);
    return this.#read(op);
  }

  #write(op: PutOperation): void {
    const namespace = encodeNamespace(op.namespace);
    if (op.value === null) {
      this.#delete.run(namespace, op.key);
      return;
    }
    const now = Date.now();
    this.#put.run(namespace, op.key, JSON.stringify(op.value), now, now);
  }

  #read(op: GetOperation): Item | null {
    const row = this.#get.get(encodeNamespace(op.namespace), op.key) as Row | undefined;
    return row === undefined ? null : itemOf(row);
  }

  #search(op: SearchOperation): SearchItem[] {
    if (op.query !== undefined)
      throw new TypeError("SqliteStore has no vector index: search with `query` is not supported");
    const rows = this.#rowsUnder(op.namespacePrefix);
    const found = rows.map(itemOf).filter((item) => op.filter === undefined || matches(item.value, op.filter));
    const offset = op.offset ?? 0;
    return found.slice(offset, offset + (op.limit ?? 10));
  }

  #rowsUnder(prefix: readonly string[]): Row[] {
    if (prefix.length === 0) return this.#range.all("", "", "\uffff") as Row[];
    const encoded = encodeNamespace(prefix);
    // Namespaces under the prefix start with "prefix<SEPARATOR>"; the next code unit bounds the range.
    return this.#range.all(
      encoded,
      encoded + SEPARATOR,
      encoded + String.fromCharCode(SEPARATOR.charCodeAt(0) + 1),
    ) as Row[];
  }

  #listNamespaces(op: ListNamespacesOperation): string[][] {
    const all = (this.#namespaces.all() as { namespace: string }[]).map((r) => r.namespace.split(SEPARATOR));
    const kept = all.filter((ns) => (op.matchConditions ?? []).every((c) => pathMatches(ns, c.path, c.matchType)));
    const truncated = op.maxDepth === undefined ? kept : kept.map((ns) => ns.slice(0, op.maxDepth));
    const distinct = [...new Map(truncated.map((ns) => [ns.join(SEPARATOR), ns])).values()];
    return distinct.slice(op.offset, op.offset + op.limit);
  }

  /** Closes the database file. */
  close(): void {
    this.#db.close();
  }
}
