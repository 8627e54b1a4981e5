package submitter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/rivertable"
)

// Defaults for Tuning.
const (
	// TickDefault is how often a submitter looks for work: pending lines,
	// provider batches due a poll, cancels asked for.
	TickDefault = 2 * time.Second
	// GatherDefault is how long the oldest pending line waits for others to
	// join its provider batch. A batch costs an upload, a create and a poll
	// loop of its own; the jobs of one `triage run` write their lines within
	// seconds, so half a minute puts them in one batch.
	GatherDefault = 30 * time.Second
	// PollMinDefault and PollMaxDefault bound the wait between polls of a
	// provider batch: it doubles from the first to the second (jittered).
	// Batches take minutes to hours; a poll every ten minutes at worst costs
	// nothing and answers within the vendors' own reporting delay.
	PollMinDefault = 30 * time.Second
	PollMaxDefault = 10 * time.Minute
	// LeaseDefault is how long a provider batch row stays this process's
	// after it claimed it for a step; a process that died mid-step loses
	// it after this long, and another one (or its restart) resumes it.
	LeaseDefault = 5 * time.Minute
	// chunk is how many lines' outcomes are written per statement.
	chunk = 500
)

// Tuning is the submitter's timing; zero fields take the defaults.
type Tuning struct {
	Tick, Gather, PollMin, PollMax, Lease time.Duration
	// MaxLines caps the lines of one provider batch below the vendor's
	// limit. Default 0: the vendor's limit (batchapi.Limits).
	MaxLines int
	// MaxRefusals bounds the whole-batch refusals naming no line (a
	// create's 4xx, an OpenAI file error) in a row, with no batch accepted
	// in between, before the submitter stops splitting refused batches to
	// find the bad line: the lines of every further refused batch are
	// dead-lettered, and AlertBatchRefused is raised. Default 0:
	// refusalLimit's 2·⌈log2 n⌉+2 for n the largest batch refused in the
	// row. One bad line costs 2 in a row (its half, then its sibling half
	// is accepted); a quota only small batches fit costs ⌈log2 n⌉ before
	// they fit; so a run past the limit is a refusal about no line at all
	// (the account, the configuration), found in O(log n) creates.
	MaxRefusals int
}

// ForKey is t with the key's own timing from triage.toml (batch_gather,
// batch_poll_min, batch_poll_max) over it: the file is where a user tunes a
// key, and it names one key, so it is the more specific of the two.
func (t Tuning) ForKey(k *config.Key) Tuning {
	over := func(v *time.Duration, d time.Duration) {
		if d > 0 {
			*v = d
		}
	}
	over(&t.Gather, k.BatchGather)
	over(&t.PollMin, k.BatchPollMin)
	over(&t.PollMax, k.BatchPollMax)
	// A file's poll_min above the Go option's poll_max (or the other way
	// round) must not invert the backoff.
	if t.PollMax > 0 && t.PollMin > t.PollMax {
		t.PollMax = t.PollMin
	}
	return t
}

// Validate refuses a negative setting, naming it: zero takes the default,
// a negative wait or count is a mistake rather than the default.
func (t Tuning) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Tick", t.Tick}, {"Gather", t.Gather}, {"PollMin", t.PollMin}, {"PollMax", t.PollMax}, {"Lease", t.Lease},
	} {
		if d.v < 0 {
			return fmt.Errorf("submitter: Tuning.%s must not be negative, got %s (0 takes the default)", d.name, d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"MaxLines", t.MaxLines}, {"MaxRefusals", t.MaxRefusals}} {
		if d.v < 0 {
			return fmt.Errorf("submitter: Tuning.%s must not be negative, got %d (0 takes the default)", d.name, d.v)
		}
	}
	return nil
}

// WithDefaults is t with every zero (or unset) field at its default: the
// one definition of the submitter's timing, used by the submitter and by
// the CLI's progress line (how long lines are gathered).
func (t Tuning) WithDefaults() Tuning {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	minSet := t.PollMin > 0
	def(&t.Tick, TickDefault)
	def(&t.Gather, GatherDefault)
	def(&t.PollMin, PollMinDefault)
	def(&t.PollMax, PollMaxDefault)
	// Only one bound given, on the wrong side of the other's default: the
	// one given is what was meant (poll_max = "5s" alone: poll every 5s).
	if t.PollMin > t.PollMax {
		if minSet {
			t.PollMax = t.PollMin
		} else {
			t.PollMin = t.PollMax
		}
	}
	def(&t.Lease, LeaseDefault)
	return t
}

// Config builds a Submitter.
type Config struct {
	// Key is the key whose lines this submitter sends. Required.
	Key *config.Key
	// Config is the whole configuration: the auto pipelines and their
	// margins. Required.
	Config *config.Config
	// Client speaks the key's Batch API. Required.
	Client *batchapi.Client
	// Pool reaches triage's and River's tables. Required.
	Pool *pgxpool.Pool
	// Store is the shared key state: the key's breakers. Required.
	Store *keys.Store
	// Gate is the key's gate: the submitter's calls are settled by its
	// rules (keys.Gate.Settle), as a job's calls are. Required.
	Gate *keys.Gate
	// RiverSchema is River's schema ("" for the search_path).
	RiverSchema string
	// Clock pins the time (tests); nil: the database's clock, read
	// through HostClock and its offset from the database (alignClock).
	Clock keys.Clock
	// HostClock is this host's own clock (tests of a host whose clock is
	// off); nil: the system clock. The submitter never writes its times
	// to a row: it corrects them by the host's offset from the database's
	// clock first, so that a lease, a next poll and a claim's "now" mean
	// the same moment to every process of the fleet.
	HostClock keys.Clock
	// Logger default slog.Default().
	Logger *slog.Logger
	// Alerter, when set, hears when the submitter opens the key's
	// exhausted breaker (the worker's alert for a call that does).
	Alerter *keys.Alerter
	Tuning  Tuning
	// CollectOnly: no pipeline on the key is in batch or auto mode now (a
	// mode switched to sync, a rolling deploy). The submitter forms no new
	// provider batch, but polls and collects the ones in flight and wakes
	// their jobs, so a line sent is never left uncollected (its answer
	// unrecorded, its reservation held). A round does nothing while the key
	// has no open provider batch nor open line.
	CollectOnly bool
}

// Submitter sends one key's pending batch lines as provider batches,
// polls them and stores their lines' answers. See the package doc.
type Submitter struct {
	cfg   Config
	t     Tuning
	log   *slog.Logger
	key   string
	limit batchapi.Limits
	// auto pipelines and their margins, for the deadline checks.
	auto []ledger.AutoMargin

	// notBefore: no new provider batch before then (a create throttled or
	// failing). Only the loop goroutine touches it.
	notBefore time.Time
	failures  int
	// refusals counts the whole-batch refusals naming no line since a
	// provider batch was last accepted (refusedWhole); streakLines is the
	// largest batch among them, alerted whether the row was alerted.
	refusals, streakLines int
	alerted               bool
	// unsent holds the intent rows this process split off a refused batch
	// and knows it never sent: they are submitted without a Find first. A
	// restart forgets them, and the Find runs: safe, only slower.
	unsent map[int64]bool

	// offset is the database's clock minus the host's (nanoseconds),
	// measured by alignClock; alignedAt is when (host time), read and
	// written by the loop goroutine only.
	offset    atomic.Int64
	alignedAt time.Time
	// rounds counts the loop's rounds: the sweeps of whole line sets run
	// every sweepEvery of them (loop goroutine only).
	rounds int

	// renewRow writes a lease renewal (ledger.RenewProviderBatch; a test
	// replaces it to lose the answer of a renewal that committed).
	renewRow func(ctx context.Context, db ledger.DBTX, r *ledger.ProviderBatch, until time.Time, sends int) error

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a Submitter; Start runs it.
func New(cfg Config) (*Submitter, error) {
	if cfg.Key == nil || cfg.Config == nil || cfg.Client == nil || cfg.Pool == nil || cfg.Store == nil || cfg.Gate == nil {
		return nil, errors.New("submitter: Key, Config, Client, Pool, Store and Gate are required")
	}
	if err := cfg.Tuning.Validate(); err != nil {
		return nil, err
	}
	s := &Submitter{cfg: cfg, t: cfg.Tuning.WithDefaults(), log: cfg.Logger, key: cfg.Key.Name, limit: cfg.Client.Limits()}
	if s.log == nil {
		s.log = slog.Default()
	}
	// The lease must outlast the calls of one step (upload and create, each
	// bounded by the key's timeout), or a second process could take over a
	// row whose create is still in flight and, finding nothing yet, send it
	// again.
	s.t.Lease = max(s.t.Lease, 3*cfg.Key.Timeout)
	if s.t.MaxLines > 0 && s.t.MaxLines < s.limit.MaxLines {
		s.limit.MaxLines = s.t.MaxLines
	}
	for _, p := range cfg.Config.Pipelines {
		if p.Mode == config.ModeAuto {
			s.auto = append(s.auto, ledger.AutoMargin{Pipeline: p.Name, Margin: p.AutoMargin})
		}
	}
	return s, nil
}

// Start runs the submitter's loop until Stop.
func (s *Submitter) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop ends the loop and waits for the round in progress. A provider call
// cut by it is resumed by whichever process claims the row next.
func (s *Submitter) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (s *Submitter) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.t.Tick)
	defer t.Stop()
	for {
		if err := s.Round(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "batch submitter round", "key", s.key, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// now is the submitter's time: the pinned clock of a test, else the
// host's clock corrected to the database's. Every time a submitter writes
// to a row (a lease's end, a next poll) or compares with one (a claim) is
// compared by other processes with theirs: a host whose clock is off must
// not write leases that have run out, or not yet begun, for the others.
func (s *Submitter) now() time.Time {
	if s.cfg.Clock != nil {
		return s.cfg.Clock.Now()
	}
	return s.hostNow().Add(time.Duration(s.offset.Load()))
}

func (s *Submitter) hostNow() time.Time {
	if s.cfg.HostClock != nil {
		return s.cfg.HostClock.Now()
	}
	return time.Now()
}

// alignEvery is how often a submitter measures its host's offset from the
// database's clock: clocks drift by milliseconds a day, but a host's clock
// can be stepped at any time.
const alignEvery = 30 * time.Second

// alignClock measures the host's offset from the database's clock, the
// middle of the query's round trip taken as the moment the database read
// its clock. A test's pinned clock needs none.
func (s *Submitter) alignClock(ctx context.Context) error {
	if s.cfg.Clock != nil {
		return nil
	}
	before := s.hostNow()
	db, err := ledger.DatabaseNow(ctx, s.cfg.Pool)
	if err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	after := s.hostNow()
	mid := before.Add(after.Sub(before) / 2)
	s.offset.Store(int64(db.Sub(mid)))
	s.alignedAt = after
	return nil
}

// sweepEvery is how many rounds apart the sweeps of the key's whole line
// sets run (wakeAnswered: the missed wakes, the lines of jobs cancelled or
// deleted by hand): each reads every answered, not-run or pending line of
// the key, which in a million-record night is hundreds of thousands of rows
// and seconds of the database's time, for what is rare (a collection's own
// wake missed, a job cancelled by hand) and waits a few ticks unharmed: 30 s
// at the default Tick.
const sweepEvery = 15

// Round is one pass: deadlines, missed wakes (every sweepEvery rounds), new
// provider batches, and the provider batches due a step. Start calls it
// every Tuning.Tick, from one goroutine.
func (s *Submitter) Round(ctx context.Context) error {
	if s.cfg.CollectOnly {
		open, err := ledger.KeyHasOpenBatchWork(ctx, s.cfg.Pool, s.key)
		if err != nil || !open {
			return err
		}
	}
	if s.alignedAt.IsZero() || s.hostNow().Sub(s.alignedAt).Abs() >= alignEvery {
		if err := s.alignClock(ctx); err != nil {
			return err
		}
	}
	var errs []error
	if err := s.deadlines(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.rounds%sweepEvery == 0 {
		if err := s.wakeAnswered(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.rounds++
	for range 100 { // bounded: one round never runs forever
		worked, err := s.step(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		if !worked || err != nil || ctx.Err() != nil {
			break
		}
	}
	if !s.cfg.CollectOnly && !s.now().Before(s.notBefore) {
		if err := s.formAll(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pending selects the key's lines that may go in a new provider batch
// now: not of a batch whose auto deadline is near (they go synchronously),
// not of a job cancelled or deleted by hand (never sent, so never billed),
// not of a batch held by hand.
func (s *Submitter) pending(now time.Time) ledger.PendingLines {
	return ledger.PendingLines{Key: s.key, Auto: s.auto, Now: now, RiverJob: rivertable.Job(s.cfg.RiverSchema)}
}

// formAll forms and submits provider batches while pending lines are ripe,
// if the key's breakers admit a call. An open breaker due its probe admits
// one: the submitter's create is then the key's probe (a batch-mode key has
// no synchronous call to probe with), and one batch at most is formed.
//
// Ripeness is read before the admission: a submitter with nothing to send
// must not claim a due probe. The lines left can all be answered, their
// jobs waiting in the key's held queue to apply them; a round that claimed
// the probe, formed nothing and gave it back a second ahead would, ticking
// faster than the supervisor dispatches a probe job, keep those jobs from
// ever running.
func (s *Submitter) formAll(ctx context.Context) error {
	if ripe, err := s.ripe(ctx); err != nil || !ripe {
		return err
	}
	adm, err := s.cfg.Store.Admit(ctx, s.key, 0)
	if err != nil {
		return fmt.Errorf("submitter: admit: %w", err)
	}
	if !adm.Allowed {
		return nil
	}
	for i := range 100 {
		if i > 0 {
			if ripe, err := s.ripe(ctx); err != nil || !ripe {
				return err
			}
			// The last create may have tripped a breaker (a balance spent):
			// each batch is admitted afresh, or a round with more lines
			// than one batch takes sends create after refused create (100
			// to an exhausted key).
			if adm, err = s.cfg.Store.Admit(ctx, s.key, 0); err != nil {
				return fmt.Errorf("submitter: admit: %w", err)
			}
			if !adm.Allowed {
				return nil
			}
		}
		formed, err := s.form(ctx, adm)
		if !formed {
			s.settle(ctx, adm, keys.OutcomeNone, "", false)
		}
		if !formed || err != nil || adm.Probe || ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// deadlines asks for the cancel of the provider batches holding a line of
// an auto pipeline whose deadline is near, and wakes the jobs of such lines
// still waiting for a batch: their jobs take them back and call
// synchronously. It runs every round: with no deadline near it reads no
// line, and with one near only the lines of the batches concerned (see
// ledger.NearDeadlineBatches).
func (s *Submitter) deadlines(ctx context.Context) error {
	if len(s.auto) == 0 {
		return nil
	}
	now := s.now()
	near, err := ledger.NearDeadlineBatches(ctx, s.cfg.Pool, s.auto, now)
	if err != nil || len(near) == 0 {
		return err
	}
	n, err := ledger.RequestDeadlineCancels(ctx, s.cfg.Pool, s.key, near, now)
	if err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "deadline near: cancelling provider batches, their unfinished lines go synchronous", "key", s.key, "provider_batches", n)
	}
	jobs, err := ledger.NearDeadlineWaitingJobs(ctx, s.cfg.Pool, s.key, near)
	if err != nil || len(jobs) == 0 {
		return err
	}
	if _, err := rivertable.WakeJobs(ctx, s.cfg.Pool, s.cfg.RiverSchema, jobs); err != nil {
		return fmt.Errorf("submitter: wake jobs near their deadline: %w", err)
	}
	return nil
}

// wakeAnswered wakes the sleeping jobs of answered and not-run lines: a
// collection's own wake misses a job that was running at that moment. A
// collect-only submitter (no batch pipeline on the key in this process)
// also wakes the jobs of pending lines: this process forms no provider
// batch for them, so their jobs take their lines back and go the way
// their pipeline goes now (a synchronous call after a switch to sync
// mode) instead of sleeping out the line wait. In a rolling deploy where
// another process still forms batches, a woken job finds its pipeline in
// batch mode there and sleeps again on the same line.
func (s *Submitter) wakeAnswered(ctx context.Context) error {
	states := []string{ledger.LineAnswered, ledger.LineNotRun}
	if s.cfg.CollectOnly {
		states = append(states, ledger.LinePending)
	}
	err := rivertable.WakeJobsOfLines(ctx, s.cfg.Pool, s.cfg.RiverSchema, s.key, states)
	if err != nil {
		return fmt.Errorf("submitter: wake answered jobs: %w", err)
	}
	// Lines that will not be sent again because their job was cancelled
	// or deleted by hand: closed, their attempt settled as not run ($0),
	// so the ledger does not carry them as possibly billed.
	if err := ledger.CloseLinesOfGoneJobs(ctx, s.cfg.Pool, rivertable.Job(s.cfg.RiverSchema), s.key); err != nil {
		return fmt.Errorf("submitter: close lines of cancelled jobs: %w", err)
	}
	return s.settleAnsweredOrphans(ctx)
}

// row is a claimed provider batch row; its Lease fences this process's
// writes (see ledger's provider batch leases).
type row = ledger.ProviderBatch

// errLeaseLost: another process claimed the row after this one's lease ran
// out; this one writes nothing more to it.
var errLeaseLost = ledger.ErrLeaseLost

// line is one line of a provider batch, in input order.
type line struct {
	id       int64
	customID string
	body     json.RawMessage
}

// ripe reports whether the key's pending lines should go now: no line
// arrived for Gather, or the oldest has waited ten times that (a steady
// trickle is still sent), or a batch is full. Lines whose deadline is near,
// whose job is gone or which are held are left out, as form leaves them.
func (s *Submitter) ripe(ctx context.Context) (bool, error) {
	ripe, err := ledger.PendingLinesRipe(ctx, s.cfg.Pool, s.pending(s.now()), s.t.Gather, s.limit.MaxLines)
	if err != nil {
		return false, fmt.Errorf("submitter: %w", err)
	}
	return ripe, nil
}

// form groups pending lines of one model into a new provider batch (its
// intent row, committed before any provider call) and submits it, once
// ripe said the lines should go. It reports whether it formed one.
func (s *Submitter) form(ctx context.Context, adm keys.Admission) (bool, error) {
	now := s.now()
	var (
		r     row
		lines []line
	)
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		g := group{limit: s.limit}
		err := ledger.LockPendingLines(ctx, tx, s.pending(now), s.limit.MaxLines, func(pl ledger.ProviderBatchLine) bool {
			l := line{id: pl.ID, customID: pl.CustomID, body: pl.Body}
			n, err := s.cfg.Client.LineBytes(batchapi.Line{CustomID: l.customID, Body: l.body})
			if err != nil {
				n = int64(len(l.body))
			}
			_, full := g.add(l, pl.Model, n)
			return !full
		})
		if err != nil {
			return err
		}
		lines = g.lines
		if len(lines) == 0 {
			return nil
		}
		r, err = ledger.CreateProviderBatch(ctx, tx, ledger.NewProviderBatch{Key: s.key, Vendor: s.cfg.Key.Vendor,
			Model: g.model, Lines: lineIDs(lines), NextPollAt: now.Add(s.t.Lease)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("submitter: form a provider batch: %w", err)
	}
	if len(lines) == 0 {
		return false, nil
	}
	return true, s.submit(ctx, &r, lines, &adm)
}

// claim takes the provider batch row due a step soonest, leasing it.
func (s *Submitter) claim(ctx context.Context) (*row, error) {
	now := s.now()
	r, ok, err := ledger.ClaimProviderBatch(ctx, s.cfg.Pool, s.key, now, now.Add(s.t.Lease))
	if err != nil {
		return nil, fmt.Errorf("submitter: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return &r, nil
}

// step claims one due provider batch and moves it on.
func (s *Submitter) step(ctx context.Context) (bool, error) {
	r, err := s.claim(ctx)
	if r == nil || err != nil {
		return false, err
	}
	switch r.State {
	case "intent", "uploaded":
		return true, s.recover(ctx, r)
	case "submitted":
		return true, s.poll(ctx, r)
	default: // ended
		b, err := s.cfg.Client.Get(ctx, deref(r.ProviderID))
		if err != nil {
			return true, s.later(ctx, r, err)
		}
		return true, s.collect(ctx, r, b)
	}
}

func (s *Submitter) lines(ctx context.Context, id int64) ([]line, error) {
	ls, err := ledger.ProviderBatchLines(ctx, s.cfg.Pool, id)
	if err != nil {
		return nil, fmt.Errorf("submitter: %w", err)
	}
	out := make([]line, len(ls))
	for i, l := range ls {
		out[i] = line{id: l.ID, customID: l.CustomID, body: l.Body}
	}
	return out, nil
}

// lineIDs are the ids of lines.
func lineIDs(lines []line) []int64 {
	ids := make([]int64, len(lines))
	for i, l := range lines {
		ids[i] = l.id
	}
	return ids
}

// recover resumes an intent or uploaded row that a process left behind:
// the provider batch may exist (created, then the process died before
// recording it), so it is looked for before anything is sent again.
func (s *Submitter) recover(ctx context.Context, r *row) error {
	lines, err := s.lines(ctx, r.ID)
	if err != nil {
		return err
	}
	ids := make([]string, len(lines))
	for i, l := range lines {
		ids[i] = l.customID
	}
	if s.unsent[r.ID] && r.Polls == 0 && r.InputFileID == nil && !r.CancelRequested {
		// Split off a refused batch by this process, and not sent since by
		// any process (every send counts in polls first): nothing to look
		// for (and an Anthropic Find would wait for its running sibling of
		// the same size to end).
		return s.submit(ctx, r, lines, nil)
	}
	delete(s.unsent, r.ID)
	// The row's created_at is the database's clock at the intent; the
	// provider's clock may differ from it by minutes, which the client's
	// margin (batchapi.FindClockSkew) covers. No host clock is involved.
	hctx, stop := s.hold(ctx, r)
	// A line sent again keeps its custom_id, so an Anthropic batch of the
	// same lines may be another row's: recorded batches are not this one.
	known := func(ctx context.Context, id string) (bool, error) {
		return ledger.ProviderBatchRecorded(ctx, s.cfg.Pool, s.key, id, r.ID)
	}
	b, found, err := s.cfg.Client.Find(hctx, r.Tag, r.CreatedAt, ids, known)
	if lost := stop(); lost != nil {
		return lost
	}
	switch {
	case errors.Is(err, batchapi.ErrUnconfirmed):
		// A candidate has not ended: ask again later, send nothing.
		return s.reschedule(ctx, r, s.t.PollMin)
	case err != nil:
		return s.later(ctx, r, err)
	case found:
		s.log.InfoContext(ctx, "provider batch found after a restart", "key", s.key, "provider_batch", r.ID, "id", b.ID)
		return s.recordSubmitted(ctx, r, lines, b)
	}
	if r.CancelRequested {
		// Never reached the provider: its lines did not run.
		delete(s.unsent, r.ID)
		return s.release(ctx, r, "abandoned", "not_run")
	}
	return s.submit(ctx, r, lines, nil)
}

// submit uploads (OpenAI) and creates the provider batch of a leased intent
// or uploaded row, recording each step before the next call. adm is the
// breakers' admission when the caller asked already (nil: ask).
func (s *Submitter) submit(ctx context.Context, r *row, lines []line, admitted *keys.Admission) error {
	var (
		adm keys.Admission
		err error
	)
	if admitted != nil {
		adm = *admitted
	} else if adm, err = s.cfg.Store.Admit(ctx, s.key, 0); err != nil {
		return fmt.Errorf("submitter: admit: %w", err)
	}
	if !adm.Allowed {
		// The key is exhausted (or in a storm): no new batch until its
		// probe; running batches keep running. A probe claimed by a job
		// can end any moment: look again within a probe interval.
		return s.reschedule(ctx, r, min(max(adm.Wait, s.t.Tick), max(s.cfg.Key.ProbeInterval, s.t.Tick)))
	}
	// The Find (or the admission) took time: the lease starts afresh before
	// the first call that may create something. The send is counted in the
	// row (polls) before it is made, so that no process takes the row for
	// one nobody sent (recover's shortcut for split-off halves).
	if err := s.renewSending(ctx, r); err != nil {
		s.settle(ctx, adm, keys.OutcomeNone, "", false)
		return err
	}
	// From here the provider may have it: a later claim looks first.
	delete(s.unsent, r.ID)
	bl := make([]batchapi.Line, len(lines))
	for i, l := range lines {
		bl[i] = batchapi.Line{CustomID: l.customID, Body: l.body}
	}
	fileID := deref(r.InputFileID)
	if fileID == "" && s.cfg.Key.Vendor == "openai" {
		hctx, stop := s.hold(ctx, r)
		fileID, err = s.cfg.Client.Upload(hctx, bl, r.Tag)
		if lost := stop(); lost != nil {
			// Another process owns the row now and sends it itself; an
			// uploaded file is only storage, never billed.
			s.settle(ctx, adm, keys.OutcomeNone, "", true)
			return lost
		}
		if err != nil {
			return s.refused(ctx, r, lines, adm, err)
		}
		if err := ledger.RecordUpload(ctx, s.cfg.Pool, *r, fileID); err != nil {
			if errors.Is(err, errLeaseLost) {
				s.settle(ctx, adm, keys.OutcomeNone, "", true)
			}
			return fmt.Errorf("submitter: %w", err)
		}
	}
	hctx, stop := s.hold(ctx, r)
	b, err := s.cfg.Client.Create(hctx, fileID, bl, r.Tag)
	lost := stop()
	if err != nil {
		if lost != nil {
			// Cut because another process took the row over: it looks for
			// this create (Find) before it sends anything.
			s.settle(ctx, adm, keys.OutcomeNone, "", true)
			return lost
		}
		return s.refused(ctx, r, lines, adm, err)
	}
	s.settle(ctx, adm, keys.OutcomeSuccess, "", true)
	s.failures = 0
	if b.VendorStatus != "validating" {
		s.accepted() // Anthropic validates at create
	}
	s.log.InfoContext(ctx, "provider batch submitted", "key", s.key, "provider_batch", r.ID, "id", b.ID, "lines", len(lines))
	return s.recordSubmitted(ctx, r, lines, b)
}

// settle tells the key's breakers what the submitter's call (an upload or
// a create) admitted as adm came to, by the gate's rules (keys.Gate.Settle,
// the decision a job's call goes through): o is keys.OutcomeOf the answer's
// class, or keys.OutcomeNone when no answer can be judged; called says the
// call reached the provider. When the create is the key's probe, a created
// batch proves the key works again, a refusal of the request says nothing
// about the balance, and an exhausted answer to a storm probe ends the
// storm and trips the key. It raises key_exhausted for the call that
// opened the exhausted breaker and key_resumed for the probe that closed it.
func (s *Submitter) settle(ctx context.Context, adm keys.Admission, o keys.Outcome, reason string, called bool) {
	if !adm.Probe && o != keys.OutcomeExhausted {
		return
	}
	rep, err := s.cfg.Gate.Settle(ctx, adm, o, reason, called)
	if err != nil {
		s.log.WarnContext(ctx, "batch submitter breaker report", "key", s.key, "err", err)
		return
	}
	if rep.Tripped {
		s.alertExhausted(ctx, reason)
	}
	if rep.Resumed && s.cfg.Alerter != nil {
		s.cfg.Alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyResumed, Key: s.key,
			Message: "probe succeeded: a provider batch was created, the key's queue drains again"})
	}
}

func (s *Submitter) recordSubmitted(ctx context.Context, r *row, lines []line, b batchapi.Batch) error {
	counts, _ := json.Marshal(b.Counts.Vendor(s.cfg.Key.Vendor))
	sb := ledger.SubmittedBatch{ProviderID: b.ID, InputFileID: b.InputFileID, VendorStatus: b.VendorStatus, Counts: counts,
		ExpiresAt: b.ExpiresAt}
	err := ledger.RecordSubmitted(ctx, s.cfg.Pool, *r, sb, s.now(), s.now().Add(s.t.PollMin))
	if errors.Is(err, errLeaseLost) {
		return s.strayBatch(ctx, r, lines, sb)
	}
	if err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	return nil
}

// strayBatch handles a provider batch this process created (or found) for
// a row it no longer owns (its lease ran out during the create): unless
// the row's new owner recorded this very batch (found it), it is a second
// batch of the same lines. It is recorded as a stray row of its own
// (ledger.RecordStrayBatch) before anything else, then cancelled at once;
// whichever process claims the stray row next polls it to its end and
// collects it (collectStray): the provider bills every line that ran
// before the cancel, and each is recorded as a paid duplicate of its
// record.
func (s *Submitter) strayBatch(ctx context.Context, r *row, lines []line, b ledger.SubmittedBatch) error {
	id, stray, err := ledger.RecordStrayBatch(ctx, s.cfg.Pool, *r, lineIDs(lines), b, s.now(), s.now().Add(s.t.PollMin))
	if err != nil {
		return fmt.Errorf("submitter: provider batch %d (%s) created after its lease was lost: %w", r.ID, b.ProviderID, err)
	}
	if !stray {
		return nil
	}
	s.log.ErrorContext(ctx, "provider batch created after the row's lease was lost: cancelling it, its lines that ran are collected as paid duplicates",
		"key", s.key, "provider_batch", r.ID, "stray", id, "id", b.ProviderID)
	if _, err := s.cfg.Client.Cancel(ctx, b.ProviderID); err != nil {
		// The stray row asks for its cancel: its next poll sends it again.
		s.log.WarnContext(ctx, "cancel of a stray provider batch failed; its next poll sends it again", "key", s.key,
			"provider_batch", id, "id", b.ProviderID, "err", err)
	}
	return fmt.Errorf("submitter: provider batch %d: %w", r.ID, errLeaseLost)
}

// renew moves the row's lease a full Lease ahead, if it is still this
// process's.
func (s *Submitter) renew(ctx context.Context, r *row) error {
	return s.renewCounting(ctx, r, 0)
}

// renewSending is renew before a send: the row's polls count it.
func (s *Submitter) renewSending(ctx context.Context, r *row) error {
	return s.renewCounting(ctx, r, 1)
}

func (s *Submitter) renewCounting(ctx context.Context, r *row, sends int) error {
	renew := s.renewRow
	if renew == nil {
		renew = ledger.RenewProviderBatch
	}
	until := s.now().Add(s.t.Lease)
	err := renew(ctx, s.cfg.Pool, r, until, sends)
	if err == nil || errors.Is(err, errLeaseLost) {
		if err != nil {
			return fmt.Errorf("submitter: %w", err)
		}
		return nil
	}
	// The renewal's outcome is unknown: a timeout (hold gives it a third
	// of a Lease) can come after PostgreSQL committed it. Taken for lost,
	// a create that succeeded meanwhile would be recorded as a stray of
	// its own row and cancelled, and the row created again: paid twice.
	// The row's lease says which it was.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(s.t.Lease/3, time.Second))
	defer cancel()
	lease, rerr := ledger.ProviderBatchLease(rctx, s.cfg.Pool, r.ID)
	switch {
	case rerr != nil:
		return fmt.Errorf("submitter: %w", err)
	case lease.Sub(until).Abs() < time.Microsecond:
		// It committed: the lease is this process's, until until.
		s.log.WarnContext(ctx, "provider batch lease renewed though its answer was lost", "key", s.key, "provider_batch", r.ID, "err", err)
		r.Lease = lease
		return nil
	case lease.Equal(r.Lease):
		// Not renewed, and no other process took the row.
		return fmt.Errorf("submitter: %w", err)
	default:
		return fmt.Errorf("submitter: provider batch %d: %w", r.ID, errLeaseLost)
	}
}

// hold keeps the row's lease while a provider call runs (an upload of a
// large file can outlast any fixed lease): it renews it every third of a
// Lease and cuts the call once it cannot, so no call of this process runs
// on a row another process may have claimed. stop ends the renewals and
// reports errLeaseLost (or the renewal's error) if the lease was not kept;
// r.Lease is then only read after stop.
func (s *Submitter) hold(ctx context.Context, r *row) (context.Context, func() error) {
	ctx, cancel := context.WithCancel(ctx)
	quit, done := make(chan struct{}), make(chan struct{})
	var lost error
	go func() {
		defer close(done)
		t := time.NewTicker(s.t.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.t.Lease/3)
			err := s.renew(rctx, r)
			rcancel()
			if err != nil {
				lost = err
				cancel()
				return
			}
		}
	}()
	return ctx, func() error {
		close(quit)
		<-done
		cancel()
		return lost
	}
}

// refused reacts to an upload or create that failed, by the class of its
// observation, as a call's failure is reacted to.
func (s *Submitter) refused(ctx context.Context, r *row, lines []line, adm keys.Admission, err error) error {
	var ce *batchapi.CallError
	if !errors.As(err, &ce) {
		// The lines cannot make a batch (batchapi.ErrInvalidLines): a bug
		// in what the worker rendered. Back to pending, and slow down.
		s.settle(ctx, adm, keys.OutcomeNone, "", false)
		s.log.ErrorContext(ctx, "provider batch not submitted", "key", s.key, "provider_batch", r.ID, "err", err)
		s.backOff()
		return s.release(ctx, r, "abandoned", "pending")
	}
	o := ce.Res.Observation
	v := s.cfg.Config.Classifier().Classify(o)
	s.log.WarnContext(ctx, "provider batch call failed", "key", s.key, "provider_batch", r.ID, "op", ce.Op,
		"status", o.Status, "phase", o.Phase, "class", v.Class.String(), "reason", v.Reason)
	noAnswer := o.Phase != classify.PhaseResponse || v.Class == classify.Ambiguous || v.Class == classify.OK
	outcome := keys.OutcomeOf(v.Class)
	if noAnswer {
		// An answer the client could not use says nothing either way.
		outcome = keys.OutcomeExcluded
	}
	s.settle(ctx, adm, outcome, v.Reason, true)
	if noAnswer {
		// No answer (or an unreadable one): the create may have happened.
		// Keep the row; the next claim looks for it before sending again.
		s.backOff()
		return s.reschedule(ctx, r, s.backoffWait())
	}
	switch v.Class {
	case classify.Exhausted:
		// The balance is spent: the key's breaker tripped (settle; its
		// sync jobs stop too); batches already running keep running.
		return s.release(ctx, r, "abandoned", "pending")
	case classify.Throttled:
		wait := s.t.PollMin
		if v.RetryAfterS != nil && *v.RetryAfterS > 0 {
			wait = time.Duration(*v.RetryAfterS * float64(time.Second))
		}
		s.notBefore = s.now().Add(wait)
		return s.release(ctx, r, "abandoned", "pending")
	case classify.Transient:
		s.backOff()
		return s.release(ctx, r, "abandoned", "pending")
	default: // Rejected
		// The provider refused the whole request and named no line: maybe
		// one line is bad, maybe all are. Split the batch to find out;
		// a line refused alone gets the refusal as its answer, so its job
		// dead-letters it with the classifier's reason.
		return s.refusedWhole(ctx, r, lines, refusal{answer: ledger.BatchLineAnswer{Observation: o, Refused: true},
			status: o.Status, code: deref(v.Code), reason: v.Reason}, "abandoned")
	}
}

func (s *Submitter) backOff() {
	s.failures++
	s.notBefore = s.now().Add(s.backoffWait())
}

func (s *Submitter) backoffWait() time.Duration {
	return jitter(s.t.PollMin, s.t.PollMax, s.failures)
}

// release ends a row that will get no further provider call (state
// abandoned) and moves its lines to lineState (pending: sent in a later
// batch; not_run: their jobs decide), waking the lines' jobs either way: a
// job that ran while its line was submitted sleeps the whole line wait on
// it (a live line), and given back pending the line is unsent again, which
// its job must not sleep past MaxAge (a key exhausted for good: its
// records would wait an hour in its paused queue, out of the probe's
// reach).
func (s *Submitter) release(ctx context.Context, r *row, state, lineState string) error {
	return pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		// Under the lease: the new owner's provider batch may hold these
		// lines.
		if err := ledger.EndProviderBatch(ctx, tx, *r, state, s.now()); err != nil {
			return fmt.Errorf("submitter: release: %w", err)
		}
		var err error
		if lineState == ledger.LinePending {
			err = s.wakeJobs(ctx, tx)(ledger.ReturnLinesPending(ctx, tx, r.ID))
		} else {
			err = s.markRest(ctx, tx, r.ID)
		}
		if err != nil {
			return fmt.Errorf("submitter: release lines of %d: %w", r.ID, err)
		}
		return nil
	})
}

// answerAll gives every line of the row the same answer, moves the row to
// state (abandoned: never created; collected: a failed batch) and wakes
// the lines' jobs.
func (s *Submitter) answerAll(ctx context.Context, r *row, state string, ans []byte) error {
	return pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if err := ledger.EndProviderBatch(ctx, tx, *r, state, s.now()); err != nil {
			return fmt.Errorf("submitter: answer the lines: %w", err)
		}
		return s.wakeJobs(ctx, tx)(ledger.AnswerLines(ctx, tx, r.ID, ans))
	})
}

// reschedule releases the lease until now+d.
func (s *Submitter) reschedule(ctx context.Context, r *row, d time.Duration) error {
	// A row another process claimed meanwhile keeps that one's lease.
	if err := ledger.RescheduleProviderBatch(ctx, s.cfg.Pool, *r, s.now().Add(d)); err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	return nil
}

// later records a failed get/cancel/download and polls again after a
// backoff: the batch runs at the provider whatever happened to a poll.
func (s *Submitter) later(ctx context.Context, r *row, err error) error {
	s.log.WarnContext(ctx, "provider batch poll failed", "key", s.key, "provider_batch", r.ID, "err", err)
	msg := err.Error()
	if err := ledger.RecordPollFailed(ctx, s.cfg.Pool, *r, msg, s.now().Add(jitter(s.t.PollMin, s.t.PollMax, r.Polls))); err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	return nil
}

// poll asks the provider how a submitted batch is doing (cancelling it
// first when a cancel was asked for) and collects it once it has ended.
func (s *Submitter) poll(ctx context.Context, r *row) error {
	id := deref(r.ProviderID)
	b, err := s.cfg.Client.Get(ctx, id)
	if err != nil {
		return s.later(ctx, r, err)
	}
	if r.CancelRequested && !b.Ended && !cancelling(b.VendorStatus) {
		// Asked for by `triage batch cancel` or a near deadline: what ran
		// is collected as usual, the rest comes back not run.
		if b, err = s.cfg.Client.Cancel(ctx, id); err != nil {
			return s.later(ctx, r, err)
		}
		s.log.InfoContext(ctx, "provider batch cancel sent", "key", s.key, "provider_batch", r.ID, "id", id)
	}
	if b.Ended {
		return s.collect(ctx, r, b)
	}
	if b.VendorStatus != "validating" {
		s.accepted() // OpenAI accepted the file
	}
	counts, _ := json.Marshal(b.Counts.Vendor(s.cfg.Key.Vendor))
	if err := ledger.RecordPoll(ctx, s.cfg.Pool, *r, b.VendorStatus, counts, s.now().Add(jitter(s.t.PollMin, s.t.PollMax, r.Polls))); err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	return nil
}

func cancelling(status string) bool { return status == "cancelling" || status == "canceling" }

// collect stores the outcome of every line of an ended batch and wakes
// their jobs: the answer of each line that ran, not_run for the others
// (expired, canceled, missing from the results). Each chunk is written in
// its own transaction and only over lines still submitted, so a collection
// cut midway is resumed without writing a line twice.
func (s *Submitter) collect(ctx context.Context, r *row, b batchapi.Batch) error {
	counts, _ := json.Marshal(b.Counts.Vendor(s.cfg.Key.Vendor))
	if err := ledger.RecordProviderBatchEnd(ctx, s.cfg.Pool, *r, ledger.EndedBatch{VendorStatus: b.VendorStatus, Counts: counts,
		OutputFileID: b.OutputFileID, ErrorFileID: b.ErrorFileID, EndedAt: endedAt(b, s.now())}); err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	if r.StrayOf != nil {
		return s.collectStray(ctx, r, b)
	}
	if b.Failed {
		return s.collectFailed(ctx, r, b)
	}
	s.accepted()
	var (
		ids, states              []string
		answers                  [][]byte
		n, exhausted, unreadable int
		served                   bool
	)
	// flush stores the outcomes read so far, a chunk per transaction, each
	// waking its lines' jobs.
	flush := func() error {
		for i := 0; i < len(ids); i += chunk {
			j := min(i+chunk, len(ids))
			err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
				return s.wakeJobs(ctx, tx)(ledger.StoreLineOutcomes(ctx, tx, r.ID, ids[i:j], states[i:j], answers[i:j]))
			})
			if err != nil {
				return err
			}
		}
		ids, states, answers = ids[:0], states[:0], answers[:0]
		return nil
	}
	// No line is stored before the batch is known to have served a line
	// (a 2xx) or to have served none (every result read): the safety net
	// reads that (ledger.LineBatchServed) when a job applies a rejected
	// line, and the jobs apply the lines in no order, so a rejection must
	// not be applied before the success that excuses it is known. Results
	// are held in memory only until the first success (all of them for a
	// batch that served none).
	for res, err := range s.cfg.Client.Results(ctx, b) {
		if errors.Is(err, batchapi.ErrMalformedResult) {
			// Its line stays submitted; see lostAnswer below.
			unreadable++
			s.log.WarnContext(ctx, "unreadable result line", "key", s.key, "provider_batch", r.ID, "err", err)
			continue
		}
		if err != nil {
			if served {
				if ferr := flush(); ferr != nil {
					return ferr
				}
			}
			return s.later(ctx, r, err)
		}
		n++
		ids = append(ids, res.CustomID)
		if res.Ran && s.cfg.Config.Classifier().Classify(res.Res.Observation).Class == classify.Exhausted {
			// Ran while the balance was spent: not billed, and its job could
			// not run while the key's breaker is open. It waits as pending
			// (same attempt), and the breaker trips once collected; the
			// submitter's next create is the key's probe.
			exhausted++
			states, answers = append(states, ledger.LinePending), append(answers, nil)
		} else if res.Ran {
			if !served && servedLine(res.Res.Observation) {
				if err := ledger.MarkProviderBatchServed(ctx, s.cfg.Pool, r.ID); err != nil {
					return fmt.Errorf("submitter: %w", err)
				}
				served = true
			}
			ans, _ := json.Marshal(ledger.BatchLineAnswer{Observation: res.Res.Observation})
			states, answers = append(states, ledger.LineAnswered), append(answers, ans)
		} else {
			states, answers = append(states, ledger.LineNotRun), append(answers, nil)
		}
		if served && len(ids) >= chunk {
			if err := flush(); err != nil {
				return fmt.Errorf("submitter: store results of %d: %w", r.ID, err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("submitter: store results of %d: %w", r.ID, err)
	}
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if unreadable > 0 {
			// Some result lines could not be read: any line without a
			// result may be one of them, run and billed. Sent again it would
			// be billed twice with the first bill missing from the ledger;
			// so each is an answer lost after the send, as a synchronous
			// call's (ambiguous: possibly billed, ambiguous_retries decides).
			if err := s.wakeJobs(ctx, tx)(ledger.AnswerLines(ctx, tx, r.ID, s.lostAnswer())); err != nil {
				return err
			}
		}
		if err := s.markRest(ctx, tx, r.ID); err != nil {
			return err
		}
		return ledger.CollectedProviderBatch(ctx, tx, r.ID, s.now())
	})
	if err != nil {
		return fmt.Errorf("submitter: finish collecting %d: %w", r.ID, err)
	}
	s.log.InfoContext(ctx, "provider batch collected", "key", s.key, "provider_batch", r.ID, "id", b.ID,
		"status", b.VendorStatus, "results", n, "exhausted", exhausted, "unreadable", unreadable)
	if exhausted > 0 {
		s.tripExhausted(ctx, "batch lines: balance exhausted")
	}
	return nil
}

// servedLine reports whether a result line's answer is the account
// serving the request (a 2xx): its provider batch is served
// (ledger.MarkProviderBatchServed), whatever its body says.
func servedLine(o classify.Observation) bool {
	return (o.Phase == "" || o.Phase == classify.PhaseResponse) && o.Status >= 200 && o.Status < 300
}

// lostAnswer is the stored answer of a line that may have run but whose
// result could not be read: sent, no usable answer.
func (s *Submitter) lostAnswer() []byte {
	ans, _ := json.Marshal(ledger.BatchLineAnswer{Observation: s.lostObservation()})
	return ans
}

// lostObservation is the observation of a line that may have run but whose
// result could not be read: sent, no response.
func (s *Submitter) lostObservation() classify.Observation {
	return classify.Observation{Vendor: s.cfg.Key.Vendor, Path: s.cfg.Key.Path, Phase: classify.PhaseSentNoResponse}
}

func (s *Submitter) alertExhausted(ctx context.Context, reason string) {
	msg := "key exhausted: no new provider batch, running ones keep running; the submitter's next create every probe_interval is the probe"
	if s.cfg.Alerter == nil {
		s.log.WarnContext(ctx, msg, "key", s.key, "reason", reason)
		return
	}
	s.cfg.Alerter.Alert(ctx, keys.Alert{Kind: keys.AlertKeyExhausted, Key: s.key, Message: msg,
		Fields: map[string]any{"reason": reason, "probe_interval": s.cfg.Key.ProbeInterval.String()}})
}

// tripExhausted opens the key's exhausted breaker from a collection that
// found lines refused for the balance: the key's synchronous jobs stop too,
// and the submitter sends no batch until its probe.
func (s *Submitter) tripExhausted(ctx context.Context, reason string) {
	st, err := s.cfg.Store.KeyStatus(ctx, s.key)
	if err == nil && st.State == keys.StateClosed {
		var opened bool
		opened, err = s.cfg.Store.Trip(ctx, s.key, keys.Admission{Breaker: keys.BreakerExhausted, Generation: st.Generation},
			reason, s.cfg.Key.ProbeInterval)
		if opened {
			s.alertExhausted(ctx, reason)
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "trip key", "key", s.key, "err", err)
	}
}

// collectFailed handles an OpenAI batch that failed validation: each line
// an error names is refused for good (its job dead-letters it as
// batch_validation:<code>); the other lines did not run and go into a new
// batch.
func (s *Submitter) collectFailed(ctx context.Context, r *row, b batchapi.Batch) error {
	lines, err := s.lines(ctx, r.ID)
	if err != nil {
		return err
	}
	var (
		ids     []string
		answers [][]byte
		named   bool
	)
	for _, ve := range b.Validation {
		if ve.Line < 1 || ve.Line > len(lines) {
			continue
		}
		named = true
		ans, _ := json.Marshal(ledger.BatchLineAnswer{RejectReason: "batch_validation:" + ve.Code, RejectDetail: ve.Message, RejectCode: ve.Code})
		ids, answers = append(ids, lines[ve.Line-1].customID), append(answers, ans)
	}
	if !named {
		// empty_file, too_many_tasks, or an error about the file that one
		// line causes: split the batch to find out, as a refused create.
		code, msg := "file", ""
		if len(b.Validation) > 0 {
			code, msg = b.Validation[0].Code, b.Validation[0].Message
		}
		reason := "batch_validation:" + code
		return s.refusedWhole(ctx, r, lines, refusal{file: true, code: code, reason: reason,
			answer: ledger.BatchLineAnswer{RejectReason: reason, RejectDetail: msg, RejectCode: code}}, "collected")
	}
	err = pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		if len(ids) > 0 {
			if err := s.wakeJobs(ctx, tx)(ledger.AnswerLinesByID(ctx, tx, r.ID, ids, answers)); err != nil {
				return err
			}
		}
		if err := s.markRest(ctx, tx, r.ID); err != nil {
			return err
		}
		return ledger.CollectedProviderBatch(ctx, tx, r.ID, s.now())
	})
	if err != nil {
		return fmt.Errorf("submitter: failed validation of %d: %w", r.ID, err)
	}
	return nil
}

// markRest marks the lines of a provider batch still submitted as not run
// and wakes their jobs.
func (s *Submitter) markRest(ctx context.Context, tx pgx.Tx, id int64) error {
	return s.wakeJobs(ctx, tx)(ledger.MarkLinesNotRun(ctx, tx, id))
}

// wakeJobs takes what a ledger line update in tx returned, the jobs of
// the lines it changed, and makes those jobs available now in tx
// (rivertable.WakeJobs): s.wakeJobs(ctx, tx)(ledger.AnswerLines(ctx, tx, …)).
func (s *Submitter) wakeJobs(ctx context.Context, tx pgx.Tx) func(ids []int64, err error) error {
	return func(ids []int64, err error) error {
		if err != nil {
			return err
		}
		_, err = rivertable.WakeJobs(ctx, tx, s.cfg.RiverSchema, ids)
		return err
	}
}

func endedAt(b batchapi.Batch, now time.Time) time.Time {
	if !b.EndedAt.IsZero() {
		return b.EndedAt
	}
	return now
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// refusal is a provider's refusal of a whole batch that names no line.
type refusal struct {
	// answer is what a line refused alone gets: its job dead-letters it.
	answer ledger.BatchLineAnswer
	status int
	// code is the vendor's error code, reason the dead letter's reason.
	code, reason string
	// file: an OpenAI validation error about the file (empty_file,
	// too_many_tasks, …), not about a line; one that persists on a single
	// line is the account's or triage's problem, and is alerted.
	file bool
}

// refusedWhole reacts to a refusal of the whole batch of r that names no
// line: it splits the lines in halves, each a provider batch of its own
// (bisection), so that the bad lines are isolated with O(log n) extra
// creates while the good ones go through. A single line refused is
// answered with the refusal (its job dead-letters it); so are the lines of
// every refused batch once MaxRefusals refusals came in a row (the
// refusal is not about a line), with an alert instead of a loop. state is
// r's final state: abandoned (never created) or collected (failed).
func (s *Submitter) refusedWhole(ctx context.Context, r *row, lines []line, rf refusal, state string) error {
	s.refusals++
	s.streakLines = max(s.streakLines, len(lines))
	limit := refusalLimit(s.t.MaxRefusals, s.streakLines)
	s.log.WarnContext(ctx, "provider batch refused as a whole, naming no line", "key", s.key, "provider_batch", r.ID,
		"lines", len(lines), "status", rf.status, "vendor_code", rf.code, "refusals_in_a_row", s.refusals, "limit", limit)
	ans, _ := json.Marshal(rf.answer)
	switch {
	case s.refusals >= limit:
		if !s.alerted {
			s.alerted = true
			s.alertRefused(ctx, r, rf, len(lines), "provider batches refused as a whole, again and again: "+
				"their lines are dead-lettered instead of being sent again; fix the cause and requeue them")
		}
		return s.answerAll(ctx, r, state, ans)
	case len(lines) <= 1:
		if rf.file {
			s.alertRefused(ctx, r, rf, len(lines), "a provider batch file error persists on a single line: the line is dead-lettered")
		}
		return s.answerAll(ctx, r, state, ans)
	}
	a, b := halves(lines)
	// The halves are due now and sent by the rounds' steps in the order
	// they became due, so a half's sibling (and its cousins) are tried
	// before the half itself is split again: an accepted one resets
	// refusals, which then count only refusals about no line at all.
	return s.split(ctx, r, state, a, b)
}

// split ends r in state and moves its lines into one new intent row per
// part, due now, in one transaction. Another process that claims one looks
// for it at the provider first, as after a crash.
func (s *Submitter) split(ctx context.Context, r *row, state string, parts ...[]line) error {
	ids := make([][]int64, len(parts))
	for i, p := range parts {
		ids[i] = lineIDs(p)
	}
	out, err := ledger.SplitProviderBatch(ctx, s.cfg.Pool, s.key, s.cfg.Key.Vendor, *r, state, s.now(), ids)
	if err != nil {
		return fmt.Errorf("submitter: %w", err)
	}
	if s.unsent == nil {
		s.unsent = map[int64]bool{}
	}
	for _, id := range out {
		s.unsent[id] = true
	}
	s.log.InfoContext(ctx, "refused provider batch split in halves", "key", s.key, "provider_batch", r.ID, "into", out)
	return nil
}

// accepted resets the refusal count: a provider batch was accepted.
func (s *Submitter) accepted() { s.refusals, s.streakLines, s.alerted = 0, 0, false }

func (s *Submitter) alertRefused(ctx context.Context, r *row, rf refusal, lines int, msg string) {
	fields := map[string]any{"provider_batch": r.ID, "lines": lines, "vendor_code": rf.code, "reason": rf.reason,
		"http_status": rf.status, "refusals_in_a_row": s.refusals}
	if s.cfg.Alerter == nil {
		s.log.ErrorContext(ctx, msg, "key", s.key, "provider_batch", r.ID, "vendor_code", rf.code, "reason", rf.reason)
		return
	}
	s.cfg.Alerter.Alert(ctx, keys.Alert{Kind: keys.AlertBatchRefused, Key: s.key, Message: msg, Fields: fields})
}
