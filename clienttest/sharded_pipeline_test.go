package clienttest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/slots"
)

// TestShardedPipelineOverGroups: a pipeline of RL.CHECK followed by
// RL.ALLOW whose keys live in different groups that the node serves (with
// --cluster-redirect forward every node serves every group; with moved, a
// node that leads two groups after an election). The batch's policy names
// are shorter than its requests (server.batchTiered pads them only up to
// the tiered command), and groups.Host.DoPolicies, splitting the batch by
// group, once read past their end and crashed the process.
func TestShardedPipelineOverGroups(t *testing.T) {
	c := startSharded(t, 3, "--cluster-redirect", "forward")
	// Setting a policy is idempotent: one whose outcome is unknown (a
	// group's leader changed while the cluster settles) is sent again.
	if err := untilDone(t, func() error {
		v, err := rawDo(c.nodes[0].respAddr, 10*time.Second, "RL.POLICY", "SET", "tier", "ALLOW", "5", "0.000001")
		if err == nil && v.str != "OK" {
			err = errors.New(v.str)
		}
		return err
	}); err != nil {
		t.Fatalf("RL.POLICY SET: %v", err)
	}
	// Two keys whose slots belong to different groups (the groups split
	// the slots into ranges; the two ends of the slot space are in the
	// first and the last).
	var a, b string
	for i := 0; a == "" || b == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if s := slots.OfString(k); s < 1000 && a == "" {
			a = k
		} else if s > 15000 && b == "" {
			b = k
		}
	}
	n := c.nodes[0]
	conn, err := net.DialTimeout("tcp", n.respAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var buf strings.Builder
	for _, cmd := range [][]string{{"RL.CHECK", "tier", a}, {"RL.ALLOW", b, "5", "0.000001"}} {
		fmt.Fprintf(&buf, "*%d\r\n", len(cmd))
		for _, arg := range cmd {
			fmt.Fprintf(&buf, "$%d\r\n%s\r\n", len(arg), arg)
		}
	}
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := conn.Write([]byte(buf.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for i := range 2 {
		v, err := readValue(r)
		if err != nil || v.kind == '-' {
			t.Fatalf("reply %d to the pipeline RL.CHECK tier %s; RL.ALLOW %s at %s: %v, %v\nstderr:\n%s", i+1, a, b, n.id, v, err, n.srv.stderr)
		}
	}
}
