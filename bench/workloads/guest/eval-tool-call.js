const found = await tools.lookup({ id: 7 });
(typeof found === "string" ? JSON.parse(found) : found).name
