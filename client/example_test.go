package client_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/standalone"
)

// The Go client asking rlserver for RL.ALLOW decisions: a token bucket of
// 2 tokens refilled at one token per 1000 seconds, one call per request.
// Allowed or denied is a value of the Decision; err is only for calls that
// failed (with the default FailOpen, a server that cannot be reached
// gives an allowed Decision whose Source says so, and err nil).
func Example() {
	addr, stop := exampleServer()
	defer stop()

	// A generous timeout: the default (50 ms) fails open on a machine
	// too busy to answer in time, which would change what this prints.
	c, err := client.New(client.Options{Addrs: []string{addr}, Timeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	for range 3 {
		d, err := c.Allow(ctx, "user:42", 2, 0.001)
		if err != nil {
			panic(err) // a bad argument, or a closed client
		}
		fmt.Println(d.Allowed, "remaining", d.Remaining, "retry after", d.RetryAfter.Round(time.Minute), "from", d.Source)
	}
	// Output:
	// true remaining 1 retry after 0s from server
	// true remaining 0 retry after 0s from server
	// false remaining 0 retry after 17m0s from server
}

// exampleServer starts an rlserver inside this process on a loopback port
// (a deployment runs the rlserver program) and returns its address.
func exampleServer() (addr string, stop func()) {
	eng := engine.New(4)
	srv := server.New(server.Config{}, standalone.New(eng, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		srv.Shutdown(context.Background())
		<-done
		eng.Close()
	}
}
