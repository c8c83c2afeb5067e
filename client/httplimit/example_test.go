package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"

	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/client/httplimit"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/standalone"
)

// The middleware in front of an HTTP handler: every request takes a token
// from its client's bucket (by default the key is the peer's IP address),
// and one over the limit gets 429 with Retry-After, before the handler
// runs. Each answer carries the RateLimit headers.
func Example() {
	addr, stop := exampleServer()
	defer stop()
	c, err := client.New(client.Options{Addrs: []string{addr}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	mw := httplimit.New(httplimit.Options{Client: c})
	mw.Default(httplimit.Rule{Limits: []httplimit.Limit{
		{Name: "api", Policy: client.TokenBucket(2, 0.001)}, // 2 requests, then one per 1000 s
	}})
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})
	api := httptest.NewServer(mw.Handler(hello))
	defer api.Close()

	for range 3 {
		resp, err := http.Get(api.URL)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d remaining=%s retry-after=%q %q\n", resp.StatusCode,
			resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"), body)
	}
	// Output:
	// 200 remaining=1 retry-after="" "hello\n"
	// 200 remaining=0 retry-after="" "hello\n"
	// 429 remaining=0 retry-after="1000" "rate limit exceeded\n"
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
