(() => {
  const teams = ["red", "blue", "green", "gold", "teal", "plum", "rust", "sand"];
  const rows = [];
  for (let i = 0; i < 10000; i++) rows.push({ team: teams[i % teams.length], score: (i * 7919) % 101 });
  return rows.reduce((totals, row) => {
    totals[row.team] = (totals[row.team] ?? 0) + row.score;
    return totals;
  }, {});
})()
