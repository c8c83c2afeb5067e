package kv

// Redis's error texts of the hash and sorted-set commands.
const (
	ErrZAddXXNX      = "ERR XX and NX options at the same time are not compatible"
	ErrZAddGTLTNX    = "ERR GT, LT, and/or NX options at the same time are not compatible"
	ErrZAddIncrPair  = "ERR INCR option supports a single increment-element pair"
	ErrZScoreNaN     = "ERR resulting score is not a number (NaN)"
	ErrMinMaxFloat   = "ERR min or max is not a float"
	ErrMinMaxLex     = "ERR min or max not valid string range item"
	ErrLimitByRank   = "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
	ErrScoresByLex   = "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
	ErrIncrNaNOrInf  = "ERR value is NaN or Infinity"
	errWrongArgsHead = "ERR wrong number of arguments for '"
)

// hzWrongArgs is Redis's arity error for the command named name, as the
// commands that check their own argument count (HSET, HMSET) reply it.
func hzWrongArgs(name string) string { return errWrongArgsHead + name + "' command" }
