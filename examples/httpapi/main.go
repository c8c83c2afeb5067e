// Command httpapi is a small HTTP API protected by rlserver through the
// client/httplimit middleware:
//
//	go run ./examples/httpapi -redis 127.0.0.1:6379
//
// GET /hello is limited per API key (X-API-Key), or per client address
// without one, and fails open onto an in-process backstop; POST /login is
// limited per address and fails closed; GET /search is checked against two
// tiers at once (per address and for the whole route). /metrics serves
// the client's Prometheus counters and is not limited.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/client/httplimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "HTTP listen address")
	servers := flag.String("redis", "127.0.0.1:6379", "rlserver address(es), comma-separated")
	password := flag.String("password", "", "rlserver password (AUTH)")
	proxies := flag.String("trusted-proxies", "", "CIDRs of reverse proxies whose X-Forwarded-For is believed, comma-separated")
	timeout := flag.Duration("timeout", 50*time.Millisecond, "per-call limiter timeout")
	flag.Parse()

	trusted, err := httplimit.ParsePrefixes(strings.Split(*proxies, ",")...)
	if err != nil {
		log.Fatalf("httpapi: %v", err)
	}
	reg := prometheus.NewRegistry()
	rl, err := client.New(client.Options{
		Addrs:      strings.Split(*servers, ","),
		Password:   *password,
		Timeout:    *timeout,
		Failure:    client.FailOpen,
		Backstop:   &client.BackstopOptions{MaxKeys: 10_000},
		Registerer: reg,
	})
	if err != nil {
		log.Fatalf("httpapi: %v", err)
	}
	defer rl.Close()

	ip := httplimit.ClientIP(httplimit.IPConfig{TrustedProxies: trusted})
	limiter := httplimit.New(httplimit.Options{
		Client: rl,
		Key:    httplimit.FirstOf(httplimit.Header("X-API-Key"), ip),
		OnReject: func(w http.ResponseWriter, r *http.Request, d client.Decision) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(map[string]any{
				"error": "rate limit exceeded", "retry_after_ms": d.RetryAfter.Milliseconds(),
			})
		},
	})
	limiter.Default(httplimit.Rule{Limits: []httplimit.Limit{
		{Name: "api", Policy: client.TokenBucket(10, 1)}, // bursts of 10, 1/s sustained
	}})
	limiter.Route("POST /login", httplimit.Rule{Limits: []httplimit.Limit{
		{Name: "login", Policy: client.SlidingLog(5, time.Minute).WithFailure(client.FailClosed), Key: ip},
	}})
	limiter.Route("GET /search", httplimit.Rule{Limits: []httplimit.Limit{
		{Name: "search-ip", Policy: client.TokenBucket(5, 0.5), Key: ip},
		{Name: "search-all", Policy: client.FixedWindow(100, time.Minute), Key: httplimit.Route()},
	}})

	api := http.NewServeMux()
	api.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		d, _ := httplimit.DecisionFrom(r.Context())
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"hello": "world", "remaining": d.Remaining, "decided_by": d.Source.String()})
	})
	api.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("logged in\n"))
	})
	api.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("results for " + r.URL.Query().Get("q") + "\n"))
	})

	root := http.NewServeMux()
	root.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	root.Handle("/", limiter.Handler(api))

	srv := &http.Server{Addr: *addr, Handler: root, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	slog.Info("httpapi listening", "addr", *addr, "rlserver", *servers)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatalf("httpapi: %v", err)
	}
}
