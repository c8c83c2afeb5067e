// Package command is what each command means, apart from the connection
// that carries it: the command table (names, arity, flags, key positions,
// ACL categories, docs: what COMMAND reports), the limiter commands'
// arguments, engine requests and replies (RL.ALLOW, CL.THROTTLE, GCRA,
// RL.FIXED..., DEL, EXISTS, TTL, TYPE), the batching of kv's data
// commands, RL.CHECK's tiers, MULTI's queue and EXEC, the optimistic
// runtime that Lua scripts run on (Scripts: a copy of the keys, the
// effects applied under WATCH digests, runs again on a conflict, a
// script's redis.call answered here), the commands answered at once from
// the backend's capabilities (RL.POLICY, SAVE, RL.CLUSTER, CLUSTER,
// COMMAND...), and the one table of error texts (errors.go).
//
// The edge (package server) owns connections, the pipeline, the batch
// step and the gates (AUTH, ACL, key length, routing, MISCONF, BUSY), and
// answers itself the few commands that need the connection or the server
// (Cmd.Edge: HELLO, AUTH, CLIENT, CONFIG, INFO...). It gets from here
// typed values: a command's requests and the reply rendered from their
// engine results, or a Call's reply (an error text, or bytes to write as
// they are). It never reads a reply back.
//
// # Usage
//
// The edge looks a command up and runs it as the table says; a
// pipeline's RL.ALLOW is
//
//	cmd := command.Lookup([]byte("rl.allow"))
//	reqs, errText := cmd.Batch(&memo, reqs, args) // parse into engine requests
//	// ... the backend decides the whole batch ...
//	cmd.Render(&kv.Writer{B: buf}, res)          // the reply, in order
//
// and an EVALSHA, answered at once, is
//
//	env := &command.Env{Backend: backend} // one per server, with its capabilities
//	x := command.Call{Env: env, Txn: &txn} // one per connection
//	x.Reset(resp3)
//	command.Lookup([]byte("evalsha")).Run(&x, args)
//	// x.Err: an error reply to write; else x.W.B as it is
package command
