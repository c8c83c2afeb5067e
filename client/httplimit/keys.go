package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc returns the identity a limit counts a request against, or ""
// when the request has none (then that limit does not apply to it). The
// server key is Options.Prefix + the limit's Name + ":" + the identity
// (in braces with Options.HashTag).
type KeyFunc func(r *http.Request) string

// serverKey is the server key of limit name for identity key.
func (m *Middleware) serverKey(name, key string) string {
	if m.o.HashTag {
		return m.o.Prefix + name + ":{" + key + "}"
	}
	return m.o.Prefix + name + ":" + key
}

// Forwarding headers ClientIP can read.
const (
	XForwardedFor = "X-Forwarded-For"
	Forwarded     = "Forwarded" // RFC 7239, its for= parameters
)

// IPConfig says how to find a request's client address.
//
// The direct peer (Request.RemoteAddr) is the client unless it is a
// trusted proxy. Then the forwarding header is read right to left, one hop
// per entry, skipping trusted proxies: the first untrusted address is the
// client, since every entry to its right was written by a proxy we trust
// and everything to its left may be forged by the client. An entry that
// is not an address ("unknown", an obfuscated identifier) stops the walk
// at the nearest known hop; if every hop is trusted, the leftmost is the
// client.
//
// Only one header is read, the one your proxies write: a proxy that
// maintains X-Forwarded-For passes a client's forged Forwarded header
// through untouched, and the other way round, so reading both would let
// clients choose their own key.
type IPConfig struct {
	// TrustedProxies are the proxies' addresses (see ParsePrefixes). Empty:
	// no headers are read.
	TrustedProxies []netip.Prefix
	// Header is XForwardedFor (the default when empty) or Forwarded.
	Header string
	// IPv6Bits is the prefix length IPv6 clients are grouped by, since
	// one host usually holds a whole /64. Default 64; 128 keys each
	// address.
	IPv6Bits int
}

// ParsePrefixes parses CIDRs ("10.0.0.0/8", "fd00::/8") and single
// addresses ("192.0.2.10").
func ParsePrefixes(cidrs ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("httplimit: %q is neither a CIDR nor an address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func (c *IPConfig) trusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr returns the request's client address as c defines it;
// invalid when RemoteAddr is not an address.
func (c *IPConfig) ClientAddr(r *http.Request) netip.Addr {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok || !c.trusted(peer) {
		return peer
	}
	name := c.Header
	if name == "" {
		name = XForwardedFor
	}
	values := r.Header.Values(name)
	last := peer
	for i := len(values) - 1; i >= 0; i-- {
		hops := strings.Split(values[i], ",")
		for j := len(hops) - 1; j >= 0; j-- {
			hop := hops[j]
			if name == Forwarded {
				hop = forwardedFor(hop)
			}
			a, ok := parseHop(hop)
			if !ok {
				return last
			}
			if !c.trusted(a) {
				return a
			}
			last = a
		}
	}
	return last
}

// forwardedFor returns the for= value of one Forwarded element.
func forwardedFor(element string) string {
	for pair := range strings.SplitSeq(element, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, "for") {
			return v
		}
	}
	return ""
}

// parseHop parses an address as the headers and RemoteAddr write it:
// "192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]:80", possibly
// quoted. IPv4-mapped IPv6 addresses become IPv4.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		// With a port (RemoteAddr always has one): try that first, as a
		// failed parse allocates its error.
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return ap.Addr().Unmap().WithZone(""), true
		}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// ClientIP keys a request by its client address (see IPConfig), IPv6
// grouped by IPv6Bits: "ip:192.0.2.1", "ip:2001:db8:1:2::/64". A request
// whose address cannot be told gets "ip:unknown", shared by all such.
func ClientIP(c IPConfig) KeyFunc {
	bits := c.IPv6Bits
	if bits <= 0 || bits > 128 {
		bits = 64
	}
	return func(r *http.Request) string {
		a := c.ClientAddr(r)
		switch {
		case !a.IsValid():
			return "ip:unknown"
		case a.Is6() && bits < 128:
			p, _ := a.Prefix(bits)
			return "ip:" + p.String()
		}
		return "ip:" + a.String()
	}
}

// Header keys a request by a header's value, such as an API key. The
// value is hashed (SHA-256, 128 bits in hex): secrets never reach the
// limiter (RL.TOP lists keys) and the key length is bounded whatever the
// client sends. A request without the header has no key.
func Header(name string) KeyFunc {
	prefix := "h:" + strings.ToLower(name) + ":"
	return func(r *http.Request) string {
		v := r.Header.Get(name)
		if v == "" {
			return ""
		}
		return prefix + digest(v)
	}
}

// User keys a request by the authenticated user that user returns (read
// from the request's context by your authentication middleware, which
// must run first); "" when there is none. IDs above 128 bytes are hashed.
func User(user func(*http.Request) string) KeyFunc {
	return func(r *http.Request) string {
		u := user(r)
		if u == "" {
			return ""
		}
		if len(u) > 128 {
			u = digest(u)
		}
		return "user:" + u
	}
}

// Route keys a request by the route pattern that selected its rule
// ("route:POST /login"), or "route:*" for the default rule. The pattern,
// not the path, so /items/1 and /items/2 count together.
func Route() KeyFunc {
	return func(r *http.Request) string {
		if st := stateOf(r); st != nil && st.pattern != "" {
			return "route:" + st.pattern
		}
		if r.Pattern != "" {
			return "route:" + r.Pattern
		}
		return "route:*"
	}
}

// Join combines keys: "user:42|route:POST /login". The request has no
// key if any part has none.
func Join(parts ...KeyFunc) KeyFunc {
	return func(r *http.Request) string {
		var b strings.Builder
		for i, f := range parts {
			k := f(r)
			if k == "" {
				return ""
			}
			if i > 0 {
				b.WriteByte('|')
			}
			b.WriteString(k)
		}
		return b.String()
	}
}

// FirstOf returns the first key a request has: FirstOf(Header("X-API-Key"),
// User(f), ClientIP(c)) counts by API key, else user, else address.
func FirstOf(parts ...KeyFunc) KeyFunc {
	return func(r *http.Request) string {
		for _, f := range parts {
			if k := f(r); k != "" {
				return k
			}
		}
		return ""
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
