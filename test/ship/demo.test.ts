/**
 * `npm run demo` as a new user runs it: the compiled demo in a child process, no key, no
 * network. The point it must keep making: the dataset stays in the sandbox, the model reads
 * only the program's final value, and the answer is right.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { generateOrders, topProductsByDeliveredRevenue } from "../../src/examples/demo-data.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const demo = join(root, "dist/examples/demo.js");

describe("npm run demo", () => {
  let run: { status: number | null; stdout: string; stderr: string };
  beforeAll(() => {
    if (!existsSync(demo)) throw new Error(`${demo} is missing: run \`npm run build:ts\` (npm test does)`);
    // No provider keys and a dead proxy: the demo must not need either.
    const env = {
      ...process.env,
      OPENAI_API_KEY: "",
      ANTHROPIC_API_KEY: "",
      HTTPS_PROXY: "http://127.0.0.1:9",
      HTTP_PROXY: "http://127.0.0.1:9",
    };
    const r = spawnSync(process.execPath, [demo], { cwd: root, env, encoding: "utf8", timeout: 60_000 });
    run = { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }, 70_000);

  it("runs to completion with the embedded model and a correct answer", () => {
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    const expected = topProductsByDeliveredRevenue(generateOrders());
    const answer = run.stdout.slice(run.stdout.lastIndexOf("model   │ Top products"));
    expected.forEach(({ product, revenue }, i) => {
      const money = revenue.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
      expect(answer).toContain(`${i + 1}. ${product}: $${money}`);
    });
    expect(run.stdout).toContain("the agent's answer names all three");
  });

  it("shows the model only the final value: no order data anywhere in the transcript", () => {
    const orders = generateOrders();
    expect(run.stdout).toContain("calls eval with a program");
    for (const o of orders.slice(0, 20)) expect(run.stdout).not.toContain(o.id);
    expect(run.stdout).not.toContain(orders[0]!.shippingNote);
    const seen = /eval {4}│ returns (\d+) B, which is all the model reads/.exec(run.stdout);
    expect(seen, run.stdout).not.toBeNull();
    expect(Number(seen![1])).toBeLessThan(400);
  });

  it("prints the figures the README quotes: the answer's bytes and the KiB kept in the sandbox", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const quoted = /only the (\d+)-byte answer enters its context; ([\d.]+) KiB of tool results/.exec(readme);
    expect(quoted, "the README's demo sentence").not.toBeNull();
    // The answer ends with the eval's own timings ("6 ms execution, 64 ms wall"), whose digits vary
    // from run to run: the README's figure holds to within those digits.
    const read = /tool output the model read: (\d+) B/.exec(run.stdout);
    expect(read, run.stdout).not.toBeNull();
    expect(Math.abs(Number(read![1]) - Number(quoted![1]))).toBeLessThanOrEqual(4);
    expect(run.stdout).toMatch(new RegExp(`kept inside the sandbox: +${quoted![2]!.replace(".", "\\.")} KiB`));
  });

  it("reports the tool results kept in the sandbox and the timings", () => {
    const kept = /kept inside the sandbox: +([\d.]+) KiB/.exec(run.stdout);
    expect(kept, run.stdout).not.toBeNull();
    // Every order crossed the tool boundary once: 480 orders of ~190 bytes each.
    expect(Number(kept![1])).toBeGreaterThan(60);
    expect(run.stdout).toMatch(/tool calls made: +13 /); // list_regions + 4 regions x 3 pages
    expect(run.stdout).toMatch(/tool fetch_orders \(from the sandbox\) +12×/);
    expect(run.stdout).toMatch(/agent run: +\d+\.\d ms/);
  });

  it("--model without the provider's key fails early and says which variable is missing", () => {
    const r = spawnSync(process.execPath, [demo, "--model", "openai:gpt-4.1"], {
      cwd: root,
      env: { ...process.env, OPENAI_API_KEY: "" },
      encoding: "utf8",
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("needs OPENAI_API_KEY");
  });
});
