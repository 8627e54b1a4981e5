package submitter

import (
	"time"

	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/decide"
)

// group gathers the lines of one provider batch: one model (OpenAI takes
// one per file; Anthropic's lines are grouped the same way so that a batch
// is one model's work in `triage status`), at most limit.MaxLines lines and
// limit.MaxBytes bytes as sent. A first line larger than MaxBytes is taken
// alone: the provider says whether it fits, and a refusal of that one line
// dead-letters it.
type group struct {
	limit batchapi.Limits
	model string
	bytes int64
	lines []line
}

// add takes l, whose body names model and which is size bytes as sent,
// when it fits. full reports that no further line can fit.
func (g *group) add(l line, model string, size int64) (taken, full bool) {
	switch {
	case len(g.lines) >= g.limit.MaxLines:
		return false, true
	case len(g.lines) == 0:
		g.model = model
	case model != g.model:
		return false, false // a batch of its own, in a later round
	case g.bytes+size > g.limit.MaxBytes:
		return false, true
	}
	g.bytes += size
	g.lines = append(g.lines, l)
	return true, len(g.lines) >= g.limit.MaxLines || g.bytes >= g.limit.MaxBytes
}

// halves splits the lines of a batch the provider refused as a whole into
// two batches of (almost) equal size, in input order, so that a bad line
// is found with about 2·log2(n) creates.
func halves(lines []line) (a, b []line) {
	mid := (len(lines) + 1) / 2
	return lines[:mid:mid], lines[mid:]
}

// refusalLimit is how many whole-batch refusals in a row end the halving
// (Tuning.MaxRefusals): set, or 2·⌈log2 n⌉+2 for a largest refused batch
// of n lines.
func refusalLimit(set, n int) int {
	if set > 0 {
		return set
	}
	return 2*ceilLog2(n) + 2
}

// ceilLog2 is how many halvings take n lines to one.
func ceilLog2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// jitter is base·2^n capped at limit, with equal jitter: a wait in
// [d/2, d] (the worker's backoff, decide.Backoff, after n failures).
func jitter(base, limit time.Duration, n int) time.Duration {
	return decide.Backoff(n+1, base, limit)
}
