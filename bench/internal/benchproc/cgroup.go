package benchproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CgroupRoot is the cgroup v1 cpu controller's mount, as in
// bench/sharded-compare.sh.
const CgroupRoot = "/sys/fs/cgroup/cpu"

// QuotaPeriod is the cgroups' CFS period: each process runs at most
// Cores times this, then waits for the next period. At 100 ms (the
// kernel's default) a tenth of a core runs 10 ms and stalls 90 ms;
// a shorter period spreads the same share more evenly, closer to a small
// machine that is never paused.
var QuotaPeriod = 100 * time.Millisecond

// CPUQuota is a cgroup of its own under CgroupRoot limited to a share of
// one core: what emulates a small machine per process on a shared one,
// with the load generator left outside it.
type CPUQuota struct {
	Path  string
	Cores float64 // the share of one core per QuotaPeriod
}

// NewCPUQuota creates the cgroup CgroupRoot/name limited to cores (0.15:
// 15 ms of CPU per 100 ms period). It needs root and cgroup v1.
func NewCPUQuota(name string, cores float64) (*CPUQuota, error) {
	cg := filepath.Join(CgroupRoot, name)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup (needs root and cgroup v1 at %s): %w", CgroupRoot, err)
	}
	q := &CPUQuota{Path: cg, Cores: cores}
	if err := os.WriteFile(filepath.Join(cg, "cpu.cfs_period_us"), []byte(strconv.FormatInt(QuotaPeriod.Microseconds(), 10)), 0o644); err != nil {
		q.Remove()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cg, "cpu.cfs_quota_us"), []byte(strconv.Itoa(int(cores*float64(QuotaPeriod.Microseconds())))), 0o644); err != nil {
		q.Remove()
		return nil, err
	}
	return q, nil
}

// Command is exec.Command(bin, args...) run inside the cgroup: a shell
// joins it, then execs bin, so the pid stays the same and /proc/<pid>/stat
// is bin's.
func (q *CPUQuota) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("sh", append([]string{"-c", `echo $$ >"$0/tasks" && exec "$@"`, q.Path, bin}, args...)...)
}

// Throttled reads cpu.stat: the periods the cgroup ran in, those in which
// it hit its quota, and the time its tasks waited for the next period.
// Throttled periods near every period mean the quota, not the machine,
// bounded the process.
func (q *CPUQuota) Throttled() (periods, throttled int64, wait time.Duration) {
	b, err := os.ReadFile(filepath.Join(q.Path, "cpu.stat"))
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "nr_periods":
			periods = n
		case "nr_throttled":
			throttled = n
		case "throttled_time":
			wait = time.Duration(n)
		}
	}
	return periods, throttled, wait
}

// Remove deletes the cgroup; it fails while a process is still in it.
func (q *CPUQuota) Remove() error { return os.Remove(q.Path) }
