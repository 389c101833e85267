// Renders bench/chart.svg: median time per operation for each timed case and engine, as
// horizontal bars on a log scale. Hand-written SVG: no charting dependency, stable diffs.
import { CASES } from "../workloads/cases.js";
import { formatUs } from "./format.js";

const COLORS = {
  "quickjs-native": "#d1495b",
  "c-floor": "#3d3d3d",
  "wasm-bellard-sync": "#edae49",
  "wasm-ng-sync": "#66a182",
  "wasm-ng-asyncify": "#00798c",
  "langchain-quickjs": "#8d6cab",
  "isolated-vm": "#30638e",
};
const FALLBACK = ["#7f7f7f", "#bcbd22", "#17becf"];

const LABEL_W = 250;
const PLOT_W = 520;
const VALUE_W = 90;
const BAR_H = 11;
const BAR_GAP = 3;
const GROUP_GAP = 16;
const TOP = 70;
const xml = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function decadeLabel(exp) {
  return formatUs(10 ** exp)
    .replace(".00", "")
    .replace(/\.0(?= )/, "");
}

/** SVG text for one run's chart. */
export function renderChart(run) {
  const engines = run.results.map((r, i) => ({
    id: r.engine,
    label: r.label ?? r.engine,
    color: COLORS[r.engine] ?? FALLBACK[i % FALLBACK.length],
    result: r,
  }));
  const groups = CASES.filter((c) => c.kind === "time" && !c.ownOnly)
    .map((c) => ({
      title: `(${c.letter}) ${c.title}`,
      bars: engines
        .map((e) => ({ engine: e, row: e.result.rows.find((r) => r.case === c.id && r.status === "ok") }))
        .filter((b) => b.row && b.row.medianUs > 0),
    }))
    .filter((g) => g.bars.length > 0);
  const values = groups.flatMap((g) => g.bars.map((b) => b.row.medianUs));
  const lo = Math.floor(Math.log10(Math.min(...values, 1)));
  const hi = Math.ceil(Math.log10(Math.max(...values, 10)));
  const x = (us) => LABEL_W + ((Math.log10(us) - lo) / (hi - lo)) * PLOT_W;
  const width = LABEL_W + PLOT_W + VALUE_W;

  // Legend, wrapped over as many rows as needed; the plot starts below it.
  const legend = [];
  let lx = 12;
  let ly = 40;
  for (const e of engines) {
    const w = 18 + e.label.length * 6.2;
    if (lx + w > width - 12) {
      lx = 12;
      ly += 16;
    }
    legend.push(
      `<rect x="${lx}" y="${ly - 9}" width="10" height="10" fill="${e.color}"/><text x="${lx + 14}" y="${ly}">${xml(e.label)}</text>`,
    );
    lx += w + 12;
  }
  const plotTop = Math.max(TOP, ly + 24);
  let plotBottom = plotTop;
  for (const g of groups) plotBottom += 16 + g.bars.length * (BAR_H + BAR_GAP) + GROUP_GAP;
  const height = plotBottom + 24;

  const parts = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="11">`,
  );
  parts.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  parts.push(
    `<text x="12" y="20" font-size="14" font-weight="600">Median time per operation (log scale, shorter is faster)</text>`,
  );
  parts.push(...legend);
  // Decade grid lines with labels along the bottom.
  for (let exp = lo; exp <= hi; exp++) {
    const gx = x(10 ** exp).toFixed(1);
    parts.push(`<line x1="${gx}" y1="${plotTop - 6}" x2="${gx}" y2="${plotBottom}" stroke="#e3e3e3"/>`);
    parts.push(
      `<text x="${gx}" y="${plotBottom + 14}" text-anchor="middle" fill="#555">${xml(decadeLabel(exp))}</text>`,
    );
  }
  let y = plotTop;
  for (const g of groups) {
    parts.push(`<text x="12" y="${y + 10}" font-weight="600">${xml(g.title)}</text>`);
    y += 16;
    for (const b of g.bars) {
      const w = Math.max(1, x(b.row.medianUs) - LABEL_W);
      parts.push(
        `<text x="${LABEL_W - 6}" y="${y + BAR_H - 2}" text-anchor="end" fill="#333">${xml(b.engine.label)}</text>`,
      );
      parts.push(`<rect x="${LABEL_W}" y="${y}" width="${w.toFixed(1)}" height="${BAR_H}" fill="${b.engine.color}"/>`);
      parts.push(
        `<text x="${(LABEL_W + w + 4).toFixed(1)}" y="${y + BAR_H - 2}" fill="#333">${xml(formatUs(b.row.medianUs))}</text>`,
      );
      y += BAR_H + BAR_GAP;
    }
    y += GROUP_GAP;
  }
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}
