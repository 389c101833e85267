JSON.stringify(JSON.parse(input))
