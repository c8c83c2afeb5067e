package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParsePrefixes("10.0.0.0/8", "192.0.2.10", "fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	xff := IPConfig{TrustedProxies: trusted}
	fwd := IPConfig{TrustedProxies: trusted, Header: Forwarded}
	cases := []struct {
		name   string
		c      IPConfig
		remote string
		header map[string][]string
		want   string
	}{
		{"untrusted peer, spoofed XFF ignored", xff, "203.0.113.7:1234", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "203.0.113.7"},
		{"untrusted peer, spoofed Forwarded ignored", fwd, "203.0.113.7:1234", map[string][]string{"Forwarded": {"for=1.2.3.4"}}, "203.0.113.7"},
		{"no trusted proxies configured", IPConfig{}, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "10.0.0.1"},
		{"trusted peer, one hop", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"trusted chain skipped right to left", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1, 10.0.0.2, 192.0.2.10"}}, "198.51.100.1"},
		{"client-forged entries left of the real one", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6, 7.7.7.7, 198.51.100.1"}}, "198.51.100.1"},
		{"several header lines", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"6.6.6.6", "198.51.100.1, 10.0.0.3"}}, "198.51.100.1"},
		{"trusted peer without the header", xff, "10.0.0.1:1", nil, "10.0.0.1"},
		{"all hops trusted: the leftmost", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"10.0.0.9, 10.0.0.2"}}, "10.0.0.9"},
		{"garbage hop: the nearest known", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1, unknown, 10.0.0.2"}}, "10.0.0.2"},
		{"hop with a port", xff, "10.0.0.1:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1:5555"}}, "198.51.100.1"},
		{"IPv4-mapped IPv6 peer", xff, "[::ffff:10.0.0.1]:1", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"the other header is not read", xff, "10.0.0.1:1", map[string][]string{"Forwarded": {"for=6.6.6.6"}}, "10.0.0.1"},
		{"Forwarded", fwd, "10.0.0.1:1", map[string][]string{"Forwarded": {`for=6.6.6.6, for="[2001:db8::7]:4711";proto=https, for=10.0.0.5;by=10.0.0.1`}}, "2001:db8::7"},
		{"Forwarded, case and spaces", fwd, "[fd00::1]:1", map[string][]string{"Forwarded": {"proto=http; For=198.51.100.2"}}, "198.51.100.2"},
		{"Forwarded obfuscated", fwd, "10.0.0.1:1", map[string][]string{"Forwarded": {"for=_hidden, for=10.0.0.4"}}, "10.0.0.4"},
	}
	for _, tc := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		r.Header = http.Header(tc.header)
		if r.Header == nil {
			r.Header = http.Header{}
		}
		if got := tc.c.ClientAddr(r).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestKeyFuncs(t *testing.T) {
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:443"
	r.Header.Set("X-API-Key", "secret")
	if got := ClientIP(IPConfig{})(r); got != "ip:2001:db8:1:2::/64" {
		t.Errorf("IPv6 key %q", got)
	}
	if got := ClientIP(IPConfig{IPv6Bits: 128})(r); got != "ip:2001:db8:1:2:3:4:5:6" {
		t.Errorf("IPv6 /128 key %q", got)
	}
	bad := httptest.NewRequest("GET", "/x", nil)
	bad.RemoteAddr = "pipe"
	if got := ClientIP(IPConfig{})(bad); got != "ip:unknown" {
		t.Errorf("unparsable peer %q", got)
	}
	// sha256("secret"), first 16 bytes.
	if got := Header("X-API-Key")(r); got != "h:x-api-key:2bb80d537b1da3e38bd30361aa855686" {
		t.Errorf("header key %q", got)
	}
	if got := Header("X-Other")(r); got != "" {
		t.Errorf("missing header key %q", got)
	}
	user := User(func(*http.Request) string { return "42" })
	if got := Join(user, Route())(r); got != "user:42|route:*" {
		t.Errorf("joined %q", got)
	}
	if got := Join(Header("X-Other"), user)(r); got != "" {
		t.Errorf("join with a missing part %q", got)
	}
	if got := FirstOf(Header("X-Other"), user, ClientIP(IPConfig{}))(r); got != "user:42" {
		t.Errorf("first of %q", got)
	}
	r.Pattern = "GET /x"
	if got := Route()(r); got != "route:GET /x" {
		t.Errorf("route %q", got)
	}
}
