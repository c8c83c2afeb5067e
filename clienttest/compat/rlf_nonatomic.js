// rate-limiter-flexible's RateLimiterRedisNonAtomic through ioredis, run by
// clienttest/limiters_test.go against rlserver and against a real
// redis-server.
//
// Usage: node rlf_nonatomic.js protocol host:port keyPrefix key n
//
// Builds a limiter of 10 points per 60 s (storeClient an ioredis client with
// RESP protocol 2 or 3), consumes one point of key n times in a row, and
// prints one JSON line:
//
//   {"version": "<rate-limiter-flexible version>", "ioredis": "<version>",
//    "results": [{"ok": bool, "remainingPoints": n, "msBeforeNext": ms,
//                 "consumedPoints": n}, ...],
//    "consumed": <resolved>, "rejected": <rejected>,
//    "get": {"consumedPoints": n, "msBeforeNext": ms} (limiter.get after),
//    "commands": [["multi"], ["get", key], ...]}
//
// "commands" is every command ioredis wrote, recorded by wrapping
// sendCommand (rlserver has no MONITOR). A consume that is over the limit
// rejects with a RateLimiterRes; anything else that rejects (a Redis error)
// is printed to stderr and exits 1.
"use strict";

const Redis = require("ioredis");
const { RateLimiterRedisNonAtomic } = require("rate-limiter-flexible");
const version = require("rate-limiter-flexible/package.json").version;
const ioredisVersion = require("ioredis/package.json").version;

async function main() {
  const [protocol, addr, keyPrefix, key, n] = process.argv.slice(2);
  const i = addr.lastIndexOf(":");
  const client = new Redis({
    host: addr.slice(0, i),
    port: Number(addr.slice(i + 1)),
    protocol: Number(protocol),
    maxRetriesPerRequest: 0,
    enableOfflineQueue: true,
  });
  await new Promise((resolve, reject) => {
    client.once("ready", resolve);
    client.once("error", reject);
  });

  const commands = [];
  const send = client.sendCommand.bind(client);
  client.sendCommand = (cmd, stream) => {
    commands.push([cmd.name, ...cmd.args.map(String)]);
    return send(cmd, stream);
  };

  const limiter = new RateLimiterRedisNonAtomic({
    storeClient: client,
    points: 10,
    duration: 60,
    keyPrefix,
  });

  const results = [];
  let consumed = 0;
  let rejected = 0;
  for (let k = 0; k < Number(n); k++) {
    try {
      const res = await limiter.consume(key);
      consumed++;
      results.push({ ok: true, remainingPoints: res.remainingPoints, msBeforeNext: res.msBeforeNext, consumedPoints: res.consumedPoints });
    } catch (res) {
      if (res instanceof Error) throw res;
      rejected++;
      results.push({ ok: false, remainingPoints: res.remainingPoints, msBeforeNext: res.msBeforeNext, consumedPoints: res.consumedPoints });
    }
  }
  const got = await limiter.get(key);
  process.stdout.write(
    JSON.stringify({
      version,
      ioredis: ioredisVersion,
      results,
      consumed,
      rejected,
      get: got && { consumedPoints: got.consumedPoints, msBeforeNext: got.msBeforeNext },
      commands,
    }) + "\n",
  );
  await client.quit();
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
