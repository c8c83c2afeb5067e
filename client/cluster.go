package client

import (
	"context"
	"fmt"
	"github.com/rlserver/rlserver/slots"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterReloadInterval is how often a cluster-mode client reloads the
// slot map (CLUSTER SLOTS) while calls run. go-redis reloads at once on
// -MOVED, but not when a node cannot be reached: after its leader dies, a
// group's keys would be sent to the dead address until the next reload
// (60 s by go-redis's default).
const ClusterReloadInterval = time.Second

// clusterMaxRedirects bounds the attempts of one call past the first:
// -MOVED after a leader change, and connections that broke. One -MOVED is
// expected after a failover; the rest of the budget covers a reload that
// is still on its way. The per-call timeout bounds them all anyway.
const clusterMaxRedirects = 3

// newClusterClient returns go-redis's Redis Cluster client over o.Addrs
// (seed nodes: the others are learnt from CLUSTER SLOTS).
func newClusterClient(o Options) *redis.ClusterClient {
	co := &redis.ClusterOptions{
		Addrs: o.Addrs, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		DialTimeout: o.Timeout, ReadTimeout: o.Timeout, WriteTimeout: o.Timeout, PoolTimeout: o.Timeout,
		ContextTimeoutEnabled: true,
		// One attempt per node and no sleeping between attempts: the
		// budget is the call's timeout, and a dead leader is better
		// reported at once (breaker, backstop) than retried.
		MaxRetries: -1, DialerRetries: 1, MinRetryBackoff: -1, MaxRetryBackoff: -1,
		MaxRedirects:               clusterMaxRedirects,
		ClusterStateReloadInterval: ClusterReloadInterval,
		// Every group is served by its leader only (rlserver lists no
		// replicas): read-only routing would have nowhere to go.
		ReadOnly: false,
		// The routing-policy layer fetches COMMAND on a call's first use
		// with its own 5 s timeout, ignoring the call's deadline, and
		// again on every call while that fails. Every command here sets
		// its key position (keyPos), so COMMAND is never needed.
		DisableRoutingPolicies: true,
		DisableIdentity:        true,
		PoolSize:               o.PoolSize,
	}
	if o.Redis != nil {
		adjust := o.Redis
		co.NewClient = func(no *redis.Options) *redis.Client {
			adjust(no)
			return redis.NewClient(no)
		}
	}
	return redis.NewClusterClient(co)
}

// keyPos is the position of the argument a cluster client hashes to pick
// the group: the key of the limiter commands and RL.RESET (1); RL.CHECK's
// first key, after its first policy name (2) or, in the COST n form, after
// COST n and the policy (4). COMMAND reports 2 for RL.CHECK, so a client
// trusting it hashes the cost in the COST form and pays a -MOVED per call.
// RL.POLICY has no key (0: go-redis then hashes its subcommand, any
// group's leader accepts it and replicates it to every group).
func keyPos(args []any) int8 {
	name, _ := args[0].(string)
	switch {
	case strings.EqualFold(name, "RL.POLICY"):
		return 0
	case strings.EqualFold(name, "RL.CHECK"):
		if s, ok := args[1].(string); ok && strings.EqualFold(s, "COST") {
			return 4
		}
		return 2
	}
	return 1
}

// redirect reports an error reply that sends the command to another node.
// A cluster client follows these itself; one left over when its redirects
// ran out means the slot map is changing (a failover): a failure, not the
// caller's bug.
func redirect(msg string) bool {
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// resetCluster is Reset over a cluster: one RL.RESET per hash slot, since
// a command's keys must share one (else -CROSSSLOT). It returns the keys
// removed so far with the first error.
func (c *Client) resetCluster(ctx context.Context, keys []string) (int64, error) {
	var order []int
	bySlot := map[int][]any{}
	for _, k := range keys {
		s := hashSlot(k)
		if _, ok := bySlot[s]; !ok {
			order = append(order, s)
			bySlot[s] = []any{"RL.RESET"}
		}
		bySlot[s] = append(bySlot[s], k)
	}
	var total int64
	for _, s := range order {
		v, err := c.do(ctx, c.timeout, bySlot[s])
		if err != nil {
			return total, c.callerError(err)
		}
		n, ok := v.(int64)
		if !ok {
			return total, fmt.Errorf("%w: RL.RESET replied %#v", ErrBadReply, v)
		}
		total += n
	}
	return total, nil
}

// hashSlot is the Redis Cluster hash slot of key (slots.OfString: the
// key's hash tag, when it has one, decides). Keys with the same tag
// ("{user:42}:ip", "{user:42}:login") share a slot, so RL.CHECK may take
// them together.
func hashSlot(key string) int { return slots.OfString(key) }
