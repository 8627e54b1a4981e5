//go:build unix

package classify

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time the process has used (user and system, all
// threads, the collector's included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op to a benchmark: the CPU time per call, next to
// the wall time ns/op, which on a loaded machine also counts the time the
// benchmark waited for a core.
func reportCPU(b *testing.B, from time.Duration) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-from)/float64(b.N), "cpu-ns/op")
	}
}
