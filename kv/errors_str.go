package kv

// Redis's error texts of the string and key commands.
const (
	ErrDecrOverflow = "ERR decrement would overflow"
	ErrExpireNX     = "ERR NX and XX, GT or LT options at the same time are not compatible"
	ErrExpireGTLT   = "ERR GT and LT options at the same time are not compatible"
)

// errInvalidExpire is Redis's reply to an expiry it refuses, for the
// command named name (lower case): "ERR invalid expire time in 'set'
// command".
func errInvalidExpire(name string) string {
	return "ERR invalid expire time in '" + name + "' command"
}

// errArity is Redis's reply to a command called with the wrong number of
// arguments, for the checks a command makes beyond its Spec's arity (MSET
// with an odd number of arguments, PING with two).
func errArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// errUnsupportedOption is EXPIRE's reply to an option it does not know,
// with the option as the client wrote it.
func errUnsupportedOption(opt []byte) string {
	return "ERR Unsupported option " + string(opt)
}
