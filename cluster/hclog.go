package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter is the hclog.Logger that Raft, its transport and its
// snapshot store log through: every line goes to the server's slog logger,
// so it has the server's format (text or JSON) and keys (time, level, msg),
// and the server's level (CONFIG SET loglevel included) decides what is
// written. hclog's name becomes a "logger" attribute ("raft", or
// "raft.snapshot" after Named("snapshot")).
//
// Levels map one to one: Trace and Debug to slog.LevelDebug, Info, Warn and
// Error to theirs. SetLevel is ignored: the slog handler owns the level.
type hclogAdapter struct {
	root *slog.Logger // the server's logger
	log  *slog.Logger // root with the name and args
	name string
	args []any // implied args from With, as given (alternating keys and values)

	// closing reports that the node is shutting down (Close began); nil:
	// never. See shutdownLevel.
	closing func() bool
}

func newHCLog(root *slog.Logger, name string, closing func() bool, args ...any) *hclogAdapter {
	l := root
	if name != "" {
		l = l.With("logger", name)
	}
	if len(args) > 0 {
		var as []any
		for _, at := range attrs(args) {
			as = append(as, at)
		}
		l = l.With(as...)
	}
	return &hclogAdapter{root: root, log: l, name: name, args: args, closing: closing}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// attrs turns hclog's alternating keys and values into slog attributes, so
// that both of the server's formats print them as hclog would:
//   - a key that is not a string is printed; spaces in keys become "_" (so
//     text lines stay key=value: Raft logs "backoff time");
//   - keys the server's lines own (time, level, msg, logger) get a "raft_"
//     prefix: Raft's "failed to contact" has its own "time";
//   - an error stays an error (both handlers print its text), a Stringer is
//     its String() (Raft's node and peer values, durations), hclog.Fmt is
//     formatted, and other values that are not numbers, strings or bools are
//     printed with %+v rather than marshalled as JSON objects;
//   - a value missing at the end is logged under EXTRA_VALUE_AT_END, as
//     hclog does.
func attrs(args []any) []slog.Attr {
	out := make([]slog.Attr, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, slog.Any("EXTRA_VALUE_AT_END", value(args[i])))
			break
		}
		k, ok := args[i].(string)
		if !ok {
			k = fmt.Sprint(args[i])
		}
		k = strings.ReplaceAll(k, " ", "_")
		switch k {
		case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey, "logger":
			k = "raft_" + k
		}
		out = append(out, slog.Any(k, value(args[i+1])))
	}
	return out
}

func value(v any) any {
	switch v := v.(type) {
	case nil, error, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v
	case hclog.Format:
		if len(v) == 0 {
			return ""
		}
		return fmt.Sprintf(fmt.Sprint(v[0]), v[1:]...)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprintf("%+v", v)
}

// shutdownLevel lowers the level of the lines Raft logs as errors while
// this node shuts itself down in order, which are the expected result of
// that shutdown and nothing an operator must act on:
//   - "peer has newer term, stopping replication": Close hands leadership to
//     a peer first; the peer's election in a higher term is that hand-off
//     succeeding (logged at info);
//   - "failed to decode incoming command" and "failed to accept connection":
//     an RPC from a peer that arrives after Raft stopped waits for an answer
//     that will not come and ends with "transport shutdown" when Close shuts
//     the transport (logged at debug; the peer retries elsewhere).
//
// The same lines at any other time keep their level: a newer term outside a
// hand-off, or a transport failure while running, is worth an error.
func shutdownLevel(level hclog.Level, msg string) hclog.Level {
	if level != hclog.Error {
		return level
	}
	switch msg {
	case "peer has newer term, stopping replication":
		return hclog.Info
	case "failed to decode incoming command", "failed to accept connection":
		return hclog.Debug
	}
	return level
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	if a.closing != nil && a.closing() {
		level = shutdownLevel(level, msg)
	}
	l := slogLevel(level)
	ctx := context.Background()
	if !a.log.Enabled(ctx, l) {
		return
	}
	a.log.LogAttrs(ctx, l, msg, attrs(args)...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return a.log.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return newHCLog(a.root, a.name, a.closing, append(append([]any(nil), a.args...), args...)...)
}

func (a *hclogAdapter) Name() string { return a.name }

// Named appends name to the logger's name, as hclog does ("raft.snapshot").
// The "logger" attribute is replaced, not repeated: slog cannot drop an
// attribute, so the logger is rebuilt from the root.
func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return newHCLog(a.root, name, a.closing, a.args...)
}

func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

// StandardLogger and StandardWriter serve libraries that take a *log.Logger:
// each line is logged at the level it names in a "[LEVEL]" prefix, as
// hclog's own writer does (info without one).
func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{a}
}

type stdWriter struct{ a *hclogAdapter }

func (w stdWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	level := hclog.Info
	for _, l := range []struct {
		prefix string
		level  hclog.Level
	}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error}} {
		if rest, ok := strings.CutPrefix(line, l.prefix); ok {
			line, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	w.a.Log(level, line)
	return len(p), nil
}
