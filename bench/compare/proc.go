package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// runTool runs a short-lived tool (redis-benchmark) with a time limit and
// returns its stdout. The process is killed when ctx ends or the limit
// passes.
func runTool(ctx context.Context, limit time.Duration, cmdline ...string) (out string, cpu time.Duration, err error) {
	bin, args := cmdline[0], cmdline[1:]
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = childAttr()
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", 0, fmt.Errorf("%s %s: no result within %v", bin, strings.Join(args, " "), limit)
		}
		return "", 0, ctx.Err()
	}
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: %v\n%s%s", bin, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if ps := cmd.ProcessState; ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	return stdout.String(), cpu, nil
}
