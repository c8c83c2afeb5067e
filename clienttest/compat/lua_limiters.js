// The Lua-based limiters of two npm libraries, run unchanged through
// ioredis by clienttest/lua_limiters_test.go against rlserver and against a
// real redis-server:
//
//   erl  express-rate-limit with its Redis store rate-limit-redis (two Lua
//        scripts, loaded by SCRIPT LOAD and run by EVALSHA; the store's
//        sendCommand is `(...args) => client.call(...args)` as its README
//        shows for ioredis)
//   rlf  rate-limiter-flexible's default RateLimiterRedis (one Lua script,
//        run through ioredis's defineCommand: EVAL the first time on a
//        connection, EVALSHA after)
//
// Usage: node lua_limiters.js erl|rlf protocol host:port keyPrefix
//
// Prints one JSON line: the library versions, what the library decided
// (see each mode below) and "commands": every command ioredis wrote, as
// [name, ...args] (the name and arguments as written: ioredis turns its
// script command into EVAL or EVALSHA only when it writes it), with the
// reply it got ({"reply": ...} or {"error": "message"}). The commands are
// recorded by wrapping ioredis's sendCommand, since rlserver has no MONITOR.
// Anything unexpected (a Redis error the library does not handle) is printed
// to stderr and exits 1.
"use strict";

const http = require("http");
const Redis = require("ioredis");

const fs = require("fs");
const path = require("path");

// version reads a package's version from node_modules (some packages do not
// export their package.json).
function version(pkg) {
  return JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules", pkg, "package.json"), "utf8")).version;
}

const versions = { ioredis: version("ioredis") };

function connect(protocol, addr) {
  const i = addr.lastIndexOf(":");
  const client = new Redis({
    host: addr.slice(0, i),
    port: Number(addr.slice(i + 1)),
    protocol: Number(protocol),
    maxRetriesPerRequest: 0,
    enableOfflineQueue: true,
  });
  return new Promise((resolve, reject) => {
    client.once("ready", () => resolve(client));
    client.once("error", reject);
  });
}

// record wraps client.sendCommand: every command, with its reply or error
// as the connection delivered it (before any library's retry).
function record(client) {
  const cmds = [];
  const send = client.sendCommand.bind(client);
  client.sendCommand = (cmd, stream) => {
    const entry = { cmd };
    cmds.push(entry);
    const resolve = cmd.resolve;
    const reject = cmd.reject;
    cmd.resolve = (v) => {
      entry.reply = v;
      return resolve(v);
    };
    cmd.reject = (e) => {
      entry.error = String(e && e.message ? e.message : e);
      return reject(e);
    };
    return send(cmd, stream);
  };
  return () =>
    cmds.map((e) => ({
      cmd: [e.cmd.name, ...e.cmd.args.map((a) => (Buffer.isBuffer(a) ? a.toString() : String(a)))],
      ...(e.error !== undefined ? { error: e.error } : { reply: plain(e.reply) }),
    }));
}

// plain makes a reply JSON-friendly (Buffers as strings, RESP3 maps as
// objects stay as they are).
function plain(v) {
  if (Buffer.isBuffer(v)) return v.toString();
  if (Array.isArray(v)) return v.map(plain);
  if (v === undefined) return null;
  return v;
}

// erl: rate-limit-redis's RedisStore driven directly, then under
// express-rate-limit in a tiny express app, a limit of 5 per 60 s window.
//
//   "store":   7 store.increment(key) in a row ({totalHits, msToReset}),
//              store.get(key), store.resetKey(key), store.get(key) and
//              store.increment(key) again
//   "noscript": SCRIPT FLUSH, then store.increment(key2) twice (the store
//              answers NOSCRIPT by loading its script again)
//   "app":     7 GET / on an app limited to 5 a window (status and the
//              RateLimit header's remaining r=), then limiter.resetKey and
//              one GET more
async function erl(client, prefix) {
  const { rateLimit } = require("express-rate-limit");
  const { RedisStore } = require("rate-limit-redis");
  const express = require("express");
  versions["express-rate-limit"] = version("express-rate-limit");
  versions["rate-limit-redis"] = version("rate-limit-redis");
  versions.express = version("express");

  const windowMs = 60000;
  const limit = 5;
  const out = {};
  const info = (r) => ({ totalHits: r.totalHits, msToReset: r.resetTime.getTime() - Date.now() });

  const store = new RedisStore({ sendCommand: (...args) => client.call(...args), prefix: prefix + ":store:" });
  await store.init({ windowMs });
  const inc = [];
  for (let k = 0; k < 7; k++) inc.push(info(await store.increment("user")));
  out.store = {
    increments: inc,
    passed: inc.filter((r) => r.totalHits <= limit).length,
    limited: inc.filter((r) => r.totalHits > limit).length,
    get: info(await store.get("user")),
  };
  await store.resetKey("user");
  out.store.getAfterReset = info(await store.get("user"));
  out.store.incrementAfterReset = info(await store.increment("user"));

  await client.call("SCRIPT", "FLUSH");
  out.noscript = [info(await store.increment("other")), info(await store.increment("other"))];

  const app = express();
  const limiter = rateLimit({
    windowMs,
    limit,
    standardHeaders: "draft-8",
    legacyHeaders: false,
    keyGenerator: () => "user",
    store: new RedisStore({ sendCommand: (...args) => client.call(...args), prefix: prefix + ":app:" }),
  });
  app.use(limiter);
  app.get("/", (req, res) => res.send("ok"));
  const server = http.createServer(app);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/`;
  const get = async () => {
    const res = await fetch(url);
    await res.text();
    const h = res.headers.get("ratelimit") || "";
    const m = /;\s*r=(\d+)/.exec(h);
    return { status: res.status, remaining: m ? Number(m[1]) : null, retryAfter: res.headers.get("retry-after") };
  };
  const requests = [];
  for (let k = 0; k < 7; k++) requests.push(await get());
  await limiter.resetKey("user");
  const afterReset = await get();
  server.close();
  out.app = {
    requests,
    passed: requests.filter((r) => r.status === 200).length,
    limited: requests.filter((r) => r.status === 429).length,
    afterReset,
  };
  return out;
}

// rlf: RateLimiterRedis, 10 points per 60 s, 13 consumes of one key in a
// row, then limiter.get.
async function rlf(client, prefix) {
  const { RateLimiterRedis } = require("rate-limiter-flexible");
  versions["rate-limiter-flexible"] = version("rate-limiter-flexible");
  const limiter = new RateLimiterRedis({ storeClient: client, points: 10, duration: 60, keyPrefix: prefix });
  const results = [];
  let consumed = 0;
  let rejected = 0;
  const res = (ok, r) => ({ ok, remainingPoints: r.remainingPoints, msBeforeNext: r.msBeforeNext, consumedPoints: r.consumedPoints });
  for (let k = 0; k < 13; k++) {
    try {
      results.push(res(true, await limiter.consume("user")));
      consumed++;
    } catch (r) {
      if (r instanceof Error) throw r;
      results.push(res(false, r));
      rejected++;
    }
  }
  const got = await limiter.get("user");
  return { results, consumed, rejected, get: got && { consumedPoints: got.consumedPoints, msBeforeNext: got.msBeforeNext } };
}

async function main() {
  const [mode, protocol, addr, prefix] = process.argv.slice(2);
  const client = await connect(protocol, addr);
  const commands = record(client);
  let out;
  if (mode === "erl") out = await erl(client, prefix);
  else if (mode === "rlf") out = await rlf(client, prefix);
  else throw new Error("mode: erl or rlf");
  process.stdout.write(JSON.stringify({ versions, ...out, commands: commands() }) + "\n");
  await client.quit();
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
