package command

import "context"

// Persistence commands: SAVE, BGSAVE, LASTSAVE, SHUTDOWN. They reach the
// snapshots through Env.Persistence (a standalone server's); without it
// they answer ErrNoPersistence. While a failed save stops writes, the
// edge refuses the write commands before they get here (MISCONF).

func init() {
	admin := []string{"@admin", "@slow", "@dangerous"}
	register(
		&Cmd{Name: "save", Arity: 1, Flags: []string{"admin", "noscript", "no_async_loading", "no_multi"}, ACL: admin,
			Summary: "Synchronously saves the limiter state to disk.", Group: "server", Since: "1.0.0", Run: save},
		&Cmd{Name: "bgsave", Arity: -1, Flags: []string{"admin", "noscript", "no_async_loading"}, ACL: admin,
			Summary: "Asynchronously saves the limiter state to disk.", Group: "server", Since: "1.0.0", Run: bgsave},
		&Cmd{Name: "lastsave", Arity: 1, Flags: []string{"loading", "stale", "fast"}, ACL: []string{"@admin", "@fast", "@dangerous"},
			Summary: "Returns the Unix timestamp of the last successful save to disk.", Group: "server", Since: "1.0.0", Run: lastsave},
		&Cmd{Name: "shutdown", Arity: -1, Flags: []string{"admin", "noscript", "loading", "stale", "no_multi", "allow_busy"}, ACL: admin,
			Summary: "Saves the limiter state (unless NOSAVE) and stops the server.", Group: "server", Since: "1.0.0", Run: shutdown},
	)
}

func save(x *Call, _ [][]byte) {
	p := x.Env.Persistence
	switch {
	case p == nil:
		x.fail(ErrNoPersistence)
	case p.Save(context.Background()) != nil:
		x.fail(errSaveFailed)
	default:
		x.W.OK()
	}
}

// bgsave: BGSAVE [SCHEDULE]. As in Redis, SCHEDULE changes nothing while
// a snapshot is being saved: the reply is still an error.
func bgsave(x *Call, args [][]byte) {
	p := x.Env.Persistence
	switch {
	case len(args) > 2 || (len(args) == 2 && !EqualFold(args[1], "schedule")):
		x.fail(ErrSyntax)
	case p == nil:
		x.fail(ErrNoPersistence)
	case !p.BackgroundSave():
		x.fail(errBgsaveRunning)
	default:
		x.W.Status("Background saving started")
	}
}

func lastsave(x *Call, _ [][]byte) {
	p := x.Env.Persistence
	if p == nil {
		x.fail(ErrNoPersistence)
		return
	}
	x.W.Int(p.LastSave().Unix())
}

// shutdown: SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. It saves unless
// NOSAVE; a failed save keeps the server running (FORCE: stops anyway).
// On success, as in Redis, there is no reply: the connection closes and
// the process exits 0 once the other clients are drained. NOW changes
// nothing (there are no replicas to wait for); ABORT has nothing to
// abort, since a shutdown is not delayed.
func shutdown(x *Call, args [][]byte) {
	var nosave, save, force, abort bool
	for _, a := range args[1:] {
		switch {
		case EqualFold(a, "nosave"):
			nosave = true
		case EqualFold(a, "save"):
			save = true
		case EqualFold(a, "now"):
		case EqualFold(a, "force"):
			force = true
		case EqualFold(a, "abort"):
			abort = true
		default:
			x.fail(ErrSyntax)
			return
		}
	}
	if (nosave && save) || (abort && len(args) > 2) {
		x.fail(ErrSyntax)
		return
	}
	if abort {
		x.fail(errNoShutdown)
		return
	}
	p := x.Env.Persistence
	if p == nil {
		x.fail(ErrNoPersistence)
		return
	}
	ctx := context.Background()
	err := p.Shutdown(ctx, !nosave)
	if err != nil && force {
		err = p.Shutdown(ctx, false)
	}
	if err != nil {
		x.fail(errShutdownFailed)
		return
	}
	x.Quit = true
}
