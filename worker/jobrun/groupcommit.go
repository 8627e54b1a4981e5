package jobrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/rivertable"
)

// Group commit: the answers of jobs that finish while another job's
// answer is being committed wait for that commit, then settle together in
// one transaction (their outcomes, results and cache rows, and River's
// completion of every job of the group) with one commit, the way River's
// own completer finishes many jobs in one statement. Nothing waits on a
// timer: a job that finishes alone commits at once; a busy key pays one
// commit for the jobs that piled up behind the last one. A job is never
// completed without its ledger row: both are in the one transaction, and
// the ledger's checks (an attempt finished twice) are read before the
// commit. If a group's transaction fails, each of its jobs commits alone,
// so one job's failure is its own.

var (
	// errLead hands a waiting job the lead of the next group.
	errLead = errors.New("worker: lead the next group commit")
	// errAlone tells a job its group's transaction failed: it commits
	// alone.
	errAlone = errors.New("worker: group commit failed, commit alone")
)

// groupCommit is the queue of answers waiting for the commit in flight.
type groupCommit struct {
	mu      sync.Mutex
	waiting []*groupMember
	leading bool
}

// groupHooks are test signals (nil in production): waiting hears the
// number of answers waiting after one joins; settle hears each group's
// size before its transaction; batch may add to a group's batch.
type groupHooks struct {
	waiting func(n int)
	settle  func(size int)
	batch   func(b *pgx.Batch)
}

type groupMember struct {
	ctx  context.Context
	c    *call
	done chan error // buffered: errLead, then the outcome
}

// groupable reports whether c's completion is the common one the group
// path settles: a synchronous answer settled by one statement
// (QueueSettleAnswer), with no look-up, batch line, withdrawn intent or
// resumed background response to settle besides.
func groupable(c *call, settled bool) bool {
	return settled && !c.resumed && c.line.ID == 0
}

// completeInGroup settles c's answer and completes its job in the next
// group's transaction.
func (r *Runner) completeInGroup(ctx context.Context, c *call) error {
	m := &groupMember{ctx: ctx, c: c, done: make(chan error, 1)}
	g := &r.group
	g.mu.Lock()
	g.waiting = append(g.waiting, m)
	lead := !g.leading
	g.leading = true
	if h := r.groupHooks; h != nil && h.waiting != nil {
		h.waiting(len(g.waiting))
	}
	g.mu.Unlock()
	if !lead {
		if err := <-m.done; !errors.Is(err, errLead) {
			return r.afterGroup(ctx, m, err)
		}
	}
	g.mu.Lock()
	members := g.waiting
	g.waiting = nil
	g.mu.Unlock()
	if h := r.groupHooks; h != nil && h.settle != nil {
		h.settle(len(members))
	}
	err := r.settleGroup(ctx, members)
	for _, o := range members {
		switch {
		case err == nil:
			o.done <- nil
		case len(members) == 1:
			o.done <- err
		default:
			o.done <- errAlone
		}
	}
	// The jobs that piled up meanwhile are the next group; the first of
	// them leads it.
	g.mu.Lock()
	if len(g.waiting) > 0 {
		g.waiting[0].done <- errLead
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	return r.afterGroup(ctx, m, <-m.done)
}

// afterGroup ends a member's completion: done, failed, or alone after its
// group's failure.
func (r *Runner) afterGroup(ctx context.Context, m *groupMember, err error) error {
	if errors.Is(err, errAlone) {
		err = r.settleGroup(ctx, []*groupMember{m})
	}
	if err != nil {
		return err
	}
	m.c.intentID, m.c.watchReset = 0, false
	return nil
}

// settleGroup writes the answers of members and completes their jobs in
// one transaction: one batch (begin, each answer's statement, the
// safety-net resets, River's completion of the jobs) and the commit.
func (r *Runner) settleGroup(ctx context.Context, members []*groupMember) error {
	// The same order in every process, so two groups that reset the same
	// keys' safety-net rows take their locks in one order.
	ordered := slices.SortedFunc(slices.Values(members), func(a, b *groupMember) int {
		return cmp.Or(cmp.Compare(a.c.key.cfg.Name, b.c.key.cfg.Name), cmp.Compare(a.c.job.ID, b.c.job.ID))
	})
	var b pgx.Batch
	b.BeginTx(pgx.TxOptions{})
	ids := make([]int64, 0, len(ordered))
	// The keys whose safety-net runs the group's successes end, one reset
	// each, as of the latest answer: a run of throttles that began after
	// it stays (ledger.ResetWatchRun).
	var (
		reset    []string
		answered = map[string]time.Time{}
	)
	for _, m := range ordered {
		if err := ledger.QueueSettleAnswer(&b, r.answer(m.c)); err != nil {
			return fmt.Errorf("complete: %w", err)
		}
		if k, at := m.c.key.cfg.Name, m.c.watchAnsweredAt; m.c.watchReset {
			if prev, ok := answered[k]; !ok {
				reset = append(reset, k)
				answered[k] = at
			} else if at.After(prev) {
				answered[k] = at
			}
		}
		ids = append(ids, m.c.job.ID)
	}
	for _, k := range reset {
		ledger.QueueResetWatchRun(&b, k, answered[k])
	}
	rivertable.QueueCompleteJobs(&b, r.opts.Schema, ids)
	if h := r.groupHooks; h != nil && h.batch != nil && len(members) > 1 {
		h.batch(&b)
	}
	br := r.pool.SendBatch(ctx, &b)
	tx := br.Tx()
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	if err := br.Close(); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("complete: commit: %w", err)
	}
	return nil
}
