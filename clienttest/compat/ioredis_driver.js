// An ioredis Cluster driven over stdin/stdout by
// clienttest/sharded_clients_test.go.
//
// Usage: node ioredis_driver.js protocol host:port [host:port ...]. Connects
// a Cluster to the given nodes with RESP protocol 2 or 3, waits for "ready"
// (CLUSTER SLOTS loaded, CLUSTER INFO ok), prints one JSON line
// {"ready": "<ioredis version>"}, then answers each stdin line, a JSON list
// of commands (each a list of arguments), with one JSON line: a list holding
// each command's reply or {"error": text}. Commands run one at a time
// through cluster.call, so each is routed by ioredis itself.
"use strict";

const readline = require("node:readline");
const { Cluster } = require("ioredis");
const version = require("ioredis/package.json").version;

async function main() {
  const protocol = Number(process.argv[2]);
  const nodes = process.argv.slice(3).map((a) => {
    const i = a.lastIndexOf(":");
    return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
  });
  const cluster = new Cluster(nodes, {
    redisOptions: { protocol },
    enableOfflineQueue: true,
  });
  await new Promise((resolve, reject) => {
    cluster.once("ready", resolve);
    cluster.once("error", reject);
  });
  process.stdout.write(JSON.stringify({ ready: version }) + "\n");
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const out = [];
    for (const cmd of JSON.parse(line)) {
      try {
        out.push(await cluster.call(...cmd.map(String)));
      } catch (e) {
        out.push({ error: String(e.message) });
      }
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  }
  await cluster.quit();
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
