package script

import (
	"bytes"
	"strings"
)

// Flags are a script's Redis 7 flags, from its shebang line:
//
//	#!lua flags=no-writes,allow-oom
//
// A script without a shebang runs in Redis's compatibility mode: its
// commands are checked one by one (Shebang false).
type Flags struct {
	Shebang        bool // the script has a #!lua line: its flags apply
	NoWrites       bool // no-writes: a read-only script (EVAL_RO may run it)
	AllowOOM       bool // allow-oom: it runs, and writes, while maxmemory refuses new keys
	AllowStale     bool // allow-stale: accepted (rlserver has no stale replicas)
	NoCluster      bool // no-cluster: refused on a sharded server
	AllowCrossSlot bool // allow-cross-slot-keys: accepted; keys still share a group's slots
}

// Redis's texts for the run-time checks of a script's flags.
const (
	ErrWriteFlagRO = "ERR Can not execute a script with write flag using *_ro command."
	ErrNoCluster   = "ERR Can not run script on cluster, 'no-cluster' flag is set."
)

// ParseShebang reads src's shebang line, as Redis 7.0 does
// (evalExtractShebangFlags): it returns the flags and the length of the
// line (its newline excluded: the body is compiled from there, so line
// numbers stay those of src), or Redis's error text.
func ParseShebang(src []byte) (Flags, int, string) {
	if !bytes.HasPrefix(src, []byte("#!")) {
		return Flags{}, 0, ""
	}
	end := bytes.IndexByte(src, '\n')
	if end < 0 {
		return Flags{}, 0, "ERR Invalid script shebang"
	}
	// Redis splits the line by its argument rules (quotes too); a
	// shebang's words never need them.
	parts := strings.Fields(string(src[:end]))
	if len(parts) == 0 {
		return Flags{}, 0, "ERR Invalid engine in script shebang"
	}
	if parts[0] != "#!lua" {
		return Flags{}, 0, "ERR Unexpected engine in script shebang: " + parts[0]
	}
	f := Flags{Shebang: true}
	for _, p := range parts[1:] {
		list, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return Flags{}, 0, "ERR Unknown lua shebang option: " + p
		}
		if list == "" {
			continue
		}
		for _, name := range strings.Split(list, ",") {
			switch name {
			case "no-writes":
				f.NoWrites = true
			case "allow-oom":
				f.AllowOOM = true
			case "allow-stale":
				f.AllowStale = true
			case "no-cluster":
				f.NoCluster = true
			case "allow-cross-slot-keys":
				f.AllowCrossSlot = true
			default:
				return Flags{}, 0, "ERR Unexpected flag in script shebang: " + name
			}
		}
	}
	return f, end, ""
}
