package httplimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/client/internal/rltest"
)

// TestHashTagKeepsTiersTogether: against a sharded server, a rule with two
// limits on one identity is all-or-nothing with HashTag (both keys in the
// identity's slot), and gets CROSSSLOT (answered 500) without it.
func TestHashTagKeepsTiersTogether(t *testing.T) {
	cl := rltest.StartCluster(t, serverBin, 3)
	c := newClient(t, client.Options{Addrs: cl.Addrs(), Cluster: true, Timeout: 5 * time.Second})
	rule := Rule{Limits: []Limit{
		{Name: "burst", Policy: client.TokenBucket(2, slow)},
		{Name: "hour", Policy: client.TokenBucket(3, slow)},
	}}
	for _, tagged := range []bool{true, false} {
		m := New(Options{Client: c, Key: Header("X-User"), HashTag: tagged, Prefix: fmt.Sprintf("t%v:", tagged)})
		m.Default(rule)
		h := m.Handler(&recorder{})
		for i := range 3 {
			w := request(h, "GET", "/", "203.0.113.7:5000", "X-User", "alice")
			want := map[bool]int{true: 200, false: 429}[i < 2]
			if !tagged {
				want = 500
			}
			if w.Code != want {
				t.Fatalf("HashTag %v, request %d: %d, want %d", tagged, i, w.Code, want)
			}
		}
	}
	// The denied request charged neither tier: alice's hour limit has
	// 3 - 2 = 1 token left.
	m := New(Options{Client: c, Key: Header("X-User"), HashTag: true, Prefix: "ttrue:"})
	m.Default(Rule{Limits: []Limit{{Name: "hour", Policy: client.TokenBucket(3, slow)}}})
	if w := request(m.Handler(&recorder{}), "GET", "/", "203.0.113.7:5000", "X-User", "alice"); w.Code != 200 {
		t.Fatalf("the hour limit alone after two allowed and one denied tiered requests: %d, want 200 (one token left)", w.Code)
	}
}
