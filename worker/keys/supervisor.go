package keys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/rivertable"
)

// SupervisorTickDefault is SupervisorConfig.Tick's default.
const SupervisorTickDefault = 250 * time.Millisecond

// SupervisorConfig configures a Supervisor.
type SupervisorConfig struct {
	// Keys are supervised even before they have breaker or pause state, so
	// a queue left paused by an earlier run is resumed. Keys with state in
	// the tables are always supervised. Default none.
	Keys []string
	// Tick is the mean interval between reconciliations; each is jittered by
	// ±20 %. Default SupervisorTickDefault.
	Tick time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Supervisor makes the River queues of keys follow the shared state: it
// pauses QueueName(key) while the key is paused or its breaker is not closed,
// resumes it otherwise, and dispatches the probe job when the breaker's probe
// is due (see the package documentation). Every worker process runs one;
// they agree because each only converges the queues towards the state in
// PostgreSQL, so the fleet converges even when the process that set the state
// has died.
type Supervisor struct {
	store  *Store
	queues QueueController
	cfg    SupervisorConfig

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Validate refuses a negative Tick.
func (c SupervisorConfig) Validate() error {
	return notNegative("SupervisorConfig", setting{"Tick", c.Tick})
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c SupervisorConfig) WithDefaults() SupervisorConfig {
	if c.Tick == 0 {
		c.Tick = SupervisorTickDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// NewSupervisor returns a Supervisor acting on queues (a *river.Client[pgx.Tx]).
// A cfg that Validate refuses is its error.
func NewSupervisor(store *Store, queues QueueController, cfg SupervisorConfig) (*Supervisor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Supervisor{store: store, queues: queues, cfg: cfg.WithDefaults()}, nil
}

// Start runs the reconcile loop until ctx ends or Stop is called. Starting a
// started Supervisor does nothing.
func (s *Supervisor) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Stop ends the loop and waits for it.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (s *Supervisor) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := s.ReconcileAll(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "keys supervisor: reconcile", slog.String("err", err.Error()))
		}
		timer.Reset(decide.Jitter(s.cfg.Tick, 0.8, 1.2))
	}
}

// ReconcileAll reconciles every supervised key once (one tick). It goes on
// past a key's error and returns the errors joined.
func (s *Supervisor) ReconcileAll(ctx context.Context) error {
	statuses, err := s.store.ListKeyStatus(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(statuses))
	var errs []error
	for i := range statuses {
		seen[statuses[i].Key] = true
		if err := s.reconcile(ctx, &statuses[i]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, key := range s.cfg.Keys {
		if seen[key] {
			continue
		}
		seen[key] = true
		if err := s.Reconcile(ctx, key); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reconcile brings key's River queue in line with its state now. Call it
// right after Trip or Pause so this process's own fetching stops at once
// rather than at the next tick.
func (s *Supervisor) Reconcile(ctx context.Context, key string) error {
	st, err := s.store.KeyStatus(ctx, key)
	if err != nil {
		return err
	}
	return s.reconcile(ctx, st)
}

func (s *Supervisor) reconcile(ctx context.Context, st *KeyStatus) error {
	key := st.Key
	// The exhausted breaker wins: a key that needs a human is not probed
	// for a storm.
	b, due := BreakerExhausted, st.State != StateClosed && probeDue(st.State, st.NextProbe, st.ProbeLeaseUntil, st.Now)
	if st.State == StateClosed {
		b, due = BreakerStorm, probeDue(st.Storm.State, st.Storm.NextProbe, st.Storm.ProbeLeaseUntil, st.Now)
	}
	if due && st.Pause == nil {
		jobID, err := s.store.dispatchProbe(ctx, b, key)
		if err != nil {
			return err
		}
		if jobID != 0 {
			s.cfg.Logger.InfoContext(ctx, "keys supervisor: probe dispatched", slog.String("key", key),
				slog.String("breaker", b.String()), slog.Int64("job_id", jobID), slog.String("queue", ProbeQueueName(key)))
		}
	}
	if n, err := s.store.sweepProbeQueue(ctx, key); err != nil {
		return err
	} else if n > 0 {
		s.cfg.Logger.DebugContext(ctx, "keys supervisor: jobs moved back from probe queue", slog.String("key", key), slog.Int64("jobs", n))
	}

	queue := QueueName(key)
	paused, exists, err := s.store.queuePaused(ctx, queue)
	if err != nil {
		return err
	}
	if st.Paused() {
		// Jobs that end without a call run in the probe queue: one
		// holding a paid answer applies it, one past the worker's max age
		// is dead-lettered. Neither sends anything, and one per probe
		// would leave a collected provider batch unapplied, or a key
		// exhausted for good holding its records, for days.
		n, err := rivertable.MoveJobsThatCallNot(ctx, s.store.pool, s.store.cfg.RiverSchema, queue, ProbeQueueName(key), s.store.agedBefore())
		if err != nil {
			return fmt.Errorf("keys: move the jobs that call not of %s: %w", key, err)
		}
		if n > 0 {
			s.cfg.Logger.DebugContext(ctx, "keys supervisor: jobs that end without a call moved to the probe queue", slog.String("key", key), slog.Int64("jobs", n))
		}
	}
	switch want := st.Paused(); {
	case want && !paused:
		if err := s.pauseQueue(ctx, queue, exists); err != nil {
			return err
		}
		reason := string(st.State)
		if st.State == StateClosed {
			reason = "storm_" + string(st.Storm.State)
		}
		if st.Pause != nil {
			reason = st.Pause.Reason
		}
		s.cfg.Logger.InfoContext(ctx, "keys supervisor: queue paused", slog.String("key", key), slog.String("queue", queue), slog.String("reason", reason))
	case !want && paused:
		if err := s.queues.QueueResume(ctx, queue, nil); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("keys: resume queue %s: %w", queue, err)
		}
		s.cfg.Logger.InfoContext(ctx, "keys supervisor: queue resumed", slog.String("key", key), slog.String("queue", queue))
	}
	return nil
}

func probeDue(state State, next, leaseUntil *time.Time, now time.Time) bool {
	return state == StateOpen && next != nil && !next.After(now) ||
		state == StateHalfOpen && (leaseUntil == nil || !leaseUntil.After(now))
}

// pauseQueue pauses a River queue. River's QueuePause fails with
// rivertype.ErrNotFound when the queue has no river_queue row yet (no client
// has worked it); the row is then created paused, so that a client starting
// later starts paused, and the pause is sent again to reach one that created
// the row meanwhile.
func (s *Supervisor) pauseQueue(ctx context.Context, queue string, exists bool) error {
	if exists {
		err := s.queues.QueuePause(ctx, queue, nil)
		if err == nil {
			return nil
		}
		if !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("keys: pause queue %s: %w", queue, err)
		}
	}
	if err := rivertable.CreatePausedQueue(ctx, s.store.pool, s.store.cfg.RiverSchema, queue); err != nil {
		return fmt.Errorf("keys: create paused queue %s: %w", queue, err)
	}
	if err := s.queues.QueuePause(ctx, queue, nil); err != nil {
		return fmt.Errorf("keys: pause queue %s: %w", queue, err)
	}
	return nil
}

// queuePaused reads River's river_queue row of queue.
func (s *Store) queuePaused(ctx context.Context, queue string) (paused, exists bool, err error) {
	paused, exists, err = rivertable.QueuePaused(ctx, s.pool, s.cfg.RiverSchema, queue)
	if err != nil {
		return false, false, fmt.Errorf("keys: read queue %s: %w", queue, err)
	}
	return paused, exists, nil
}

// dispatchProbe claims the due probe of key's breaker b on behalf of the
// next available job of QueueName(key) and moves that job to
// ProbeQueueName(key), in one short transaction. It returns the job's id, or
// 0 when the probe is not due (any more), the key is paused, or no job is
// available.
func (s *Store) dispatchProbe(ctx context.Context, b Breaker, key string) (int64, error) {
	var jobID int64
	err := s.lockedIn(ctx, b, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
		due := k.State == StateOpen && k.ProbeAt != nil && !k.ProbeAt.After(now) ||
			k.State == StateHalfOpen && !k.liveClaim(now)
		if !due {
			return nil
		}
		if paused, err := ledger.KeyPaused(ctx, tx, key, now); err != nil || paused {
			return err
		}
		// Jobs that cannot call (see StoreConfig.ProbeAttemptsLeft) come
		// last: a probe must be able to tell whether the key works.
		var maxAge *time.Time
		if s.cfg.ProbeMaxAge > 0 {
			t := now.Add(-s.cfg.ProbeMaxAge)
			maxAge = &t
		}
		var err error
		jobID, err = rivertable.LockNextProbeJob(ctx, tx, s.cfg.RiverSchema, QueueName(key), s.cfg.ProbeAttemptsLeft, maxAge)
		if err != nil || jobID == 0 {
			return err
		}
		if err := s.claim(ctx, tx, b, key, k.Generation, newToken(), jobID, now); err != nil {
			return err
		}
		return rivertable.SetQueue(ctx, tx, s.cfg.RiverSchema, jobID, ProbeQueueName(key))
	})
	if err != nil {
		return 0, fmt.Errorf("keys: dispatch probe %s: %w", key, err)
	}
	return jobID, nil
}

// sweepProbeQueue moves every job of ProbeQueueName(key) that is not running
// and is not the live probe back to QueueName(key): a probe that failed and
// was snoozed, a job that lost its claim to an expired lease.
func (s *Store) sweepProbeQueue(ctx context.Context, key string) (int64, error) {
	n, err := rivertable.ReturnProbeQueue(ctx, s.pool, s.cfg.RiverSchema, key, QueueName(key), ProbeQueueName(key), s.nowParam(), s.agedBefore())
	if err != nil {
		return 0, fmt.Errorf("keys: sweep probe queue %s: %w", key, err)
	}
	return n, nil
}

// agedBefore is the creation time before which a job is past ProbeMaxAge
// (the worker's MaxAge), read on this host's clock as the job's own check
// reads its age; nil when ProbeMaxAge is not set.
func (s *Store) agedBefore() *time.Time {
	if s.cfg.ProbeMaxAge <= 0 {
		return nil
	}
	t := time.Now().Add(-s.cfg.ProbeMaxAge)
	return &t
}
