package client

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the client's Prometheus collectors, resolved to their label
// values once so a call only increments.
type metrics struct {
	errNetwork, errServer, errCommand prometheus.Counter
	timeouts                          prometheus.Counter
	breakerSkips                      prometheus.Counter
	failOpen, failClosed              prometheus.Counter
	backstopAllowed, backstopDenied   prometheus.Counter
	breakerState                      prometheus.Gauge
	breakerOpened                     prometheus.Counter
	duration                          prometheus.Observer
	collectors                        []prometheus.Collector
}

// newMetrics builds the collectors under namespace and registers them on
// reg when it is not nil. backstopKeys reports the backstop's size.
func newMetrics(reg prometheus.Registerer, namespace string, backstopKeys func() float64) (*metrics, error) {
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "errors_total",
		Help: "Calls that got no decision from the server, by kind: network (unreachable, connection lost), server (transient state: CLUSTERDOWN, TRYAGAIN, LOADING, UNKNOWN, shutting down), command (an error reply returned to the caller: a bug, not a failure). Timeouts are counted apart.",
	}, []string{"kind"})
	timeouts := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "timeouts_total",
		Help: "Calls whose per-call timeout ran out before the server answered.",
	})
	skips := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "breaker_skips_total",
		Help: "Calls not sent because the circuit breaker was open.",
	})
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "degraded_decisions_total",
		Help: "Decisions made without the server, by source: fail_open (allowed, unlimited), fail_closed (denied), backstop_allowed, backstop_denied (the local per-instance limiter).",
	}, []string{"source"})
	state := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "breaker_state",
		Help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
	})
	opened := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "breaker_opened_total",
		Help: "Times the circuit breaker opened.",
	})
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "call_duration_seconds",
		Help:    "Time of calls sent to the server, failed ones included.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
	})
	keys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "backstop_keys",
		Help: "Keys held by the local backstop.",
	}, backstopKeys)
	m := &metrics{
		errNetwork: errs.WithLabelValues("network"), errServer: errs.WithLabelValues("server"),
		errCommand: errs.WithLabelValues("command"), timeouts: timeouts, breakerSkips: skips,
		failOpen: decisions.WithLabelValues("fail_open"), failClosed: decisions.WithLabelValues("fail_closed"),
		backstopAllowed: decisions.WithLabelValues("backstop_allowed"), backstopDenied: decisions.WithLabelValues("backstop_denied"),
		breakerState: state, breakerOpened: opened, duration: duration,
		collectors: []prometheus.Collector{errs, timeouts, skips, decisions, state, opened, duration, keys},
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, r := range m.collectors[:i] {
				reg.Unregister(r)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, errors.New("client: metrics already registered: give each Client its own namespace or a prometheus.WrapRegistererWith label")
			}
			return nil, err
		}
	}
	return m, nil
}
