package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/server"
)

// Named policies: the --policies file, loaded at start and on SIGHUP.
//
// Precedence: the policies saved in the snapshot (standalone) or the Raft
// log and snapshots (cluster) come back at start; then the file, when
// given, replaces them all, at start and on every reload (RL.POLICY LOAD,
// SIGHUP). Without a file, RL.POLICY SET and DEL changes persist as they
// are. A bad file at start stops the server; a bad file on reload is
// refused whole and the policies in force stay.
type policyOptions struct {
	file string
}

func addPolicyFlags(fs *flag.FlagSet, p *policyOptions) {
	fs.StringVar(&p.file, "policies", "", "policy file: one 'name KIND params...' per line (RL.POLICY SET's arguments, # comments); loaded at start, replacing the saved policies, and reloaded by RL.POLICY LOAD and SIGHUP")
}

// read parses the file at start; nil without a file.
func (p policyOptions) read() ([]*policy.Policy, error) {
	if p.file == "" {
		return nil, nil
	}
	ps, err := policy.ParseFile(p.file)
	if err != nil {
		// The line's problem in the words RL.POLICY LOAD and the log use,
		// with the file's path, which they name apart.
		var le *policy.LineError
		text := command.PolicyFileError(err)
		if errors.As(err, &le) {
			text = strings.Replace(text, "policy file ", "policy file "+p.file+" ", 1)
		}
		return nil, errors.New(text)
	}
	return ps, nil
}

// standalonePolicies makes the standalone store: the snapshot's policies,
// then the file's in their place.
func standalonePolicies(p policyOptions, snaps *snapshots, log *slog.Logger) (*policy.Store, error) {
	store := policy.NewStore()
	if len(snaps.policies) > 0 {
		ps, err := policy.ParseDefs(snaps.policies)
		if err != nil {
			return nil, err
		}
		if err := store.Replace(ps); err != nil {
			return nil, err
		}
	}
	ps, err := p.read()
	if err != nil {
		return nil, err
	}
	if p.file != "" {
		if err := store.Replace(ps); err != nil {
			return nil, err
		}
		log.Info("policy file loaded", "file", p.file, "policies", len(ps))
	}
	snaps.saver.SetPolicies(store)
	return store, nil
}

// proposePolicies has the cluster adopt the file's policies (read at
// start), retrying in the background until a leader applies them or ctx
// ends.
func proposePolicies(ctx context.Context, node interface {
	ReplacePolicies(context.Context, []*policy.Policy) error
}, file string, ps []*policy.Policy, log *slog.Logger) {
	for {
		err := node.ReplacePolicies(ctx, ps)
		if err == nil {
			log.Info("policy file loaded", "file", file, "policies", len(ps))
			return
		}
		log.Debug("policy file not applied yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// catchHangup starts catching SIGHUP, before the server serves, so that
// no SIGHUP can kill it: reloadOnHangup handles what arrives.
func catchHangup() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}

// reloadOnHangup reloads the policy file on every SIGHUP on ch
// (catchHangup) until ctx ends. SIGHUP is caught even without a file, so
// it never kills the server.
func reloadOnHangup(ctx context.Context, ch chan os.Signal, srv *server.Server, file string, log *slog.Logger) {
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		if file == "" {
			log.Warn("SIGHUP: no policy file to reload (--policies)")
			continue
		}
		// ReloadPolicies logs the outcome, a refusal included.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		srv.ReloadPolicies(rctx)
		cancel()
	}
}
