// Package command is what each command means, apart from the connection
// that carries it: the limiter commands' arguments, engine requests and
// replies (RL.ALLOW, CL.THROTTLE, GCRA, RL.FIXED..., DEL, EXISTS, TTL,
// TYPE), the batching of kv's data commands, MULTI's queue and EXEC, and
// the optimistic runtime that Lua scripts run on (Scripts: a copy of the
// keys, the effects applied under WATCH digests, runs again on a
// conflict), with a script's redis.call answered here.
//
// The edge (package server) owns connections, the pipeline, the batch
// step and the gates (AUTH, ACL, key length, routing, BUSY). It gets from
// here typed values: a Limiter's requests and the reply rendered from
// their engine results, an Outcome of a script or a transaction (an
// error text, or a reply to write as it is). It never reads a reply back.
//
// # Usage
//
// The edge registers Limiters() in its table; a pipeline's RL.ALLOW is
//
//	reqs, errText := l.Batch(&memo, reqs, args)   // parse into engine requests
//	// ... the backend decides the whole batch ...
//	l.Render(&kv.Writer{B: buf}, res)             // the reply, in order
//
// and an EVALSHA is
//
//	st := command.NewScripts(backend, known, memLimit)
//	out := st.Eval(args, true, false, command.Run{RESP3: resp3})
//	// out.Err: an error reply to write; else out.Reply as it is
//
// Errors inside the package are wire texts from errors.go (Redis's
// words); ErrorText maps the engine's and a backend's errors to them.
package command
