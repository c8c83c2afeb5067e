package command

// FUNCTION: rlserver has no Redis Functions (its scripts are EVAL's), so
// FUNCTION FLUSH has nothing to remove and answers OK, and FUNCTION LIST
// lists nothing; tools that clear a server before use (Redis's own test
// suite) then work. Loading a function (FUNCTION LOAD, FCALL) is not
// offered: the command is unknown.

func init() {
	fn := container("function", "A container for function commands", "scripting",
		&Cmd{Name: "function|flush", Arity: -2, Flags: []string{"write", "noscript"}, ACL: []string{"@write", "@slow", "@scripting"},
			Summary: "Deletes all functions (there are none: rlserver runs EVAL's scripts only)", Group: "scripting", Since: "7.0.0",
			Run: func(x *Call, args [][]byte) {
				if len(args) > 3 || (len(args) == 3 && !EqualFold(args[2], "sync") && !EqualFold(args[2], "async")) {
					x.fail(ErrSyntax)
					return
				}
				x.W.OK()
			}},
		&Cmd{Name: "function|list", Arity: -2, Flags: []string{"noscript"}, ACL: []string{"@slow", "@scripting"},
			Summary: "Returns information about all libraries (none)", Group: "scripting", Since: "7.0.0",
			Run: func(x *Call, _ [][]byte) { x.W.Array(0) }},
	)
	register(fn)
}
