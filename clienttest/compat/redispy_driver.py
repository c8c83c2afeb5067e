"""A redis-py RedisCluster driven over stdin/stdout by
clienttest/sharded_clients_test.go.

Usage: redispy_driver.py host port. Connects with RedisCluster(host, port)
(which loads CLUSTER SLOTS and COMMAND), prints one JSON line
{"ready": "<redis-py version>"}, then answers each stdin line, a JSON list
of commands (each a list of arguments), with one JSON line: a list holding
each command's reply (bulk strings decoded as UTF-8) or {"error": text}.
Commands run one at a time through execute_command, so each is routed by
redis-py itself.
"""

import json
import sys

import redis
from redis.cluster import RedisCluster


def plain(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(plain(k)): plain(x) for k, x in v.items()}
    return v


def main():
    rc = RedisCluster(host=sys.argv[1], port=int(sys.argv[2]))
    print(json.dumps({"ready": redis.__version__}), flush=True)
    for line in sys.stdin:
        out = []
        for cmd in json.loads(line):
            try:
                out.append(plain(rc.execute_command(*cmd)))
            except Exception as e:  # the test checks the text
                out.append({"error": "%s: %s" % (type(e).__name__, e)})
        print(json.dumps(out), flush=True)
    rc.close()


main()
