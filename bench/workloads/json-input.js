// Deterministic ~1 MiB JSON document for the JSON round-trip case (same bytes for every engine).

/** Compact JSON text of at least `bytes` UTF-8 bytes: an array of varied records. */
export function makeJsonInput(bytes = 1 << 20) {
  const parts = [];
  let length = 2;
  for (let i = 0; length < bytes; i++) {
    const record = JSON.stringify({
      id: i,
      name: `item-${i}`,
      tags: ["alpha", "beta", `t${i % 13}`],
      price: ((i * 37) % 1000) / 10,
      active: i % 3 === 0,
      owner: { team: ["red", "blue", "green"][i % 3], level: i % 7, note: "é✓".repeat(i % 4) },
    });
    parts.push(record);
    length += Buffer.byteLength(record) + 1;
  }
  return `[${parts.join(",")}]`;
}
