package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/respio"
)

// memResult is one server's memory measurement.
type memResult struct {
	keys                    int
	rssBase, rssAfter, peak int64            // VmRSS before and after, VmHWM after
	info0, info1            map[string]int64 // INFO memory's integer fields before and after
	dbsize                  int64
	loadRate                float64 // keys per second while loading
	settle                  time.Duration
}

func (m *memResult) perKey(before, after int64) float64 {
	return float64(after-before) / float64(m.keys)
}

// measureMemory loads cfg.memKeys counters with a TTL into a fresh
// server: INCR counter:<n> and EXPIRE counter:<n> 3600 for n in
// [0, keys), through 8 connections of 256 keys per round trip.
func measureMemory(ctx context.Context, cfg config, srv *benchproc.Server) (*memResult, error) {
	m := &memResult{keys: cfg.memKeys}
	time.Sleep(500 * time.Millisecond)
	var err error
	if m.rssBase, err = benchproc.RSS(srv.Pid()); err != nil {
		return nil, err
	}
	if m.info0, err = infoMemory(srv.Addr); err != nil {
		return nil, err
	}
	if err := benchproc.ResetPeakRSS(srv.Pid()); err != nil {
		return nil, err
	}
	cfg.logf("loading %d counters with a TTL into %s", cfg.memKeys, srv.Name)
	const conns, batch = 8, 256
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for ci := range conns {
		lo, hi := cfg.memKeys*ci/conns, cfg.memKeys*(ci+1)/conns
		wg.Go(func() {
			c, err := respio.Dial(srv.Addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Minute))
			var key []byte
			for i := lo; i < hi; i += batch {
				if ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
				end := min(i+batch, hi)
				for k := i; k < end; k++ {
					key = strconv.AppendInt(append(key[:0], "counter:"...), int64(k), 10)
					c.Out = append(c.Out, "*2\r\n$4\r\nINCR\r\n"...)
					c.Out = respio.AppendBulk(c.Out, key)
					c.Out = append(c.Out, "*3\r\n$6\r\nEXPIRE\r\n"...)
					c.Out = respio.AppendBulk(c.Out, key)
					c.Out = append(c.Out, "$4\r\n3600\r\n"...)
				}
				if err := c.Flush(); err != nil {
					errs <- err
					return
				}
				for k := i; k < end; k++ {
					for _, cmd := range []string{"INCR", "EXPIRE"} {
						if v, err := c.ReadInt(); err != nil || v != 1 {
							errs <- fmt.Errorf("%s counter:%d answered %d (%v), want 1", cmd, k, v, err)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
	m.loadRate = float64(cfg.memKeys) / time.Since(begin).Seconds()
	select {
	case err := <-errs:
		return nil, err
	default:
	}

	// Let the process settle: rlserver saves a snapshot within a second
	// of the last change and Go returns freed memory gradually; Redis's
	// cron runs every 100 ms. At least a second, then until two readings
	// half a second apart differ by less than 1% of the growth (at most
	// 10 s).
	settled := time.Now()
	time.Sleep(time.Second)
	prev, _ := benchproc.RSS(srv.Pid())
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		cur, err := benchproc.RSS(srv.Pid())
		if err != nil {
			return nil, err
		}
		d := cur - prev
		prev = cur
		if 100*max(d, -d) < max(cur-m.rssBase, 1<<20) {
			break
		}
	}
	m.settle = time.Since(settled)
	m.rssAfter = prev
	if m.peak, err = benchproc.Status(srv.Pid(), "VmHWM"); err != nil {
		return nil, err
	}
	if m.info1, err = infoMemory(srv.Addr); err != nil {
		return nil, err
	}
	c, err := respio.Dial(srv.Addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.Do("DBSIZE")
	if err != nil {
		return nil, fmt.Errorf("DBSIZE: %w", err)
	}
	m.dbsize, _ = v.(int64)
	return m, nil
}

// infoMemory reads INFO memory's integer fields.
func infoMemory(addr string) (map[string]int64, error) {
	out, err := respio.InfoMemory(addr)
	if err != nil {
		return nil, err
	}
	if _, ok := out["used_memory"]; !ok {
		return nil, fmt.Errorf("no used_memory in INFO memory")
	}
	return out, nil
}
