package server

import "github.com/rlserver/rlserver/command"

// The argument parsers are command's (Redis's rules for integers and
// floats).

func parseInt(b []byte) (int64, bool)       { return command.ParseInt(b) }
func parseFloat(b []byte) (float64, bool)   { return command.ParseFloat(b) }
func equalFold(b []byte, lower string) bool { return command.EqualFold(b, lower) }
