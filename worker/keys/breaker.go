package keys

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/rivertable"
)

// State is a breaker's state, as stored in triage_key_state.state.
type State string

// Breaker states, gobreaker's three.
const (
	StateClosed   State = "closed"    // calls go through
	StateOpen     State = "open"      // no calls until the probe time
	StateHalfOpen State = "half_open" // one probe call is out; nothing else
)

// String returns the state's stored name.
func (s State) String() string { return string(s) }

// Breaker names one of a key's two breakers. Both share one state machine
// and one probe protocol; they differ in what trips them and how they heal.
// Their rows are the ledger's (ledger.Breaker).
type Breaker = ledger.Breaker

const (
	// BreakerExhausted is tripped by an exhausted key (credits, quota,
	// revoked key): it needs a human, pages one, and probes every
	// probe_interval.
	BreakerExhausted = ledger.BreakerExhausted
	// BreakerStorm is tripped by a run or a high share of transient
	// failures (the provider is down): it heals itself through probes whose
	// cooldown grows while they fail, and alerts only when open for long.
	BreakerStorm = ledger.BreakerStorm
)

// Admission is Admit's answer for one call.
type Admission struct {
	// Breaker is the breaker that refused the call or whose probe it is.
	Breaker Breaker
	// StormGeneration is the storm breaker's generation when admitted.
	StormGeneration int64
	// Cooldown is the storm breaker's current cooldown (its probe).
	Cooldown time.Duration
	// Allowed: the call may be sent.
	Allowed bool
	// Probe: the call is the key's single half-open probe. Its outcome must be
	// reported with ProbeResult (or Trip), or given back with ReleaseProbe.
	Probe bool
	// Generation of the breaker when the call was admitted. Results from an
	// older generation are ignored.
	Generation int64
	// Token identifies the probe claim (Probe only).
	Token string
	// Wait, when not Allowed, is how long until asking again makes sense: until
	// the probe time, or until the live probe's lease ends. Snooze the job for
	// it.
	Wait time.Duration
	// State of the breaker as seen by this Admit.
	State State
}

// keyState is one breaker's row, read under its lock.
type keyState struct {
	ledger.BreakerRow
	State State
}

func (k *keyState) liveClaim(now time.Time) bool {
	return k.State == StateHalfOpen && k.ProbeOwner != nil && k.ProbeLeaseUntil != nil && k.ProbeLeaseUntil.After(now)
}

// Admit decides whether a call on key may be sent now. jobID is the River
// job the call belongs to (0 if none); it lets the job the Supervisor
// dispatched as the probe take the probe claim made on its behalf.
//
//   - closed: allowed.
//   - open, probe time not reached: not allowed; Wait until the probe time.
//   - open, probe time reached (or half-open with an expired lease): this call
//     atomically claims the single probe, the breaker goes half-open, and the
//     call is allowed with Probe set.
//   - half-open with a live claim: not allowed (Wait until the lease ends),
//     unless jobID is the job the claim was made for.
//
// The closed path is one plain SELECT; the others are a short transaction
// holding the key's row lock only for the bookkeeping.
func (s *Store) Admit(ctx context.Context, key string, jobID int64) (Admission, error) {
	adm, _, err := s.AdmitCall(ctx, key, jobID)
	return adm, err
}

// AdmitCall is Admit that also returns the key's active pause (nil when
// none), read in the same statement as both breakers on the closed path: a
// worker checks all three before every call, and this is that call's hot
// path. The pause is only read when both breakers are closed; an open
// breaker decides by itself. The exhausted breaker wins over the storm
// breaker: a key that needs a human is not probed for a storm.
func (s *Store) AdmitCall(ctx context.Context, key string, jobID int64) (Admission, *Pause, error) {
	return s.AdmitCallWith(ctx, key, jobID, nil)
}

// AdmitCallWith is AdmitCall that sends the reads extra queues on the batch
// in the same round trip as its own (a pgx.Batch): the worker reads the
// ledger's prior outcome of the call together with its admission. extra's
// results are read, and its errors returned, before the admission is
// decided; with extra nil it is AdmitCall's single statement.
func (s *Store) AdmitCallWith(ctx context.Context, key string, jobID int64, extra func(b *pgx.Batch)) (Admission, *Pause, error) {
	if err := checkKey(key); err != nil {
		return Admission{}, nil, err
	}
	var r ledger.KeyAdmission
	var err error
	if extra == nil {
		r, err = ledger.ReadKeyAdmission(ctx, s.pool, key, s.now())
	} else {
		var b pgx.Batch
		ledger.QueueKeyAdmission(&b, &r, key, s.now())
		extra(&b)
		err = s.pool.SendBatch(ctx, &b).Close()
	}
	if err != nil {
		return Admission{}, nil, fmt.Errorf("keys: admit %s: %w", key, err)
	}
	var pause *Pause
	if r.Pause != nil {
		p := Pause(*r.Pause)
		pause = &p
	}
	adm := Admission{Allowed: true, State: StateClosed, Generation: deref(r.Generation), StormGeneration: deref(r.StormGeneration)}
	switch {
	case r.State != nil && State(*r.State) != StateClosed:
		adm, err = s.admitLocked(ctx, BreakerExhausted, key, jobID)
		adm.StormGeneration = deref(r.StormGeneration)
		return adm, nil, err
	case r.StormState != nil && State(*r.StormState) != StateClosed:
		adm, err = s.admitLocked(ctx, BreakerStorm, key, jobID)
		adm.Generation = deref(r.Generation)
		return adm, nil, err
	}
	return adm, pause, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// admitLocked is Admit's path for a breaker b that is not closed. The
// Admission's Generation (or StormGeneration) is b's.
func (s *Store) admitLocked(ctx context.Context, b Breaker, key string, jobID int64) (Admission, error) {
	var adm Admission
	err := s.lockedIn(ctx, b, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
		adm = Admission{Breaker: b, Generation: k.Generation, State: k.State, Cooldown: time.Duration(k.CooldownMS) * time.Millisecond}
		if b == BreakerStorm {
			adm.Generation, adm.StormGeneration = 0, k.Generation
		}
		switch {
		case k.State == StateClosed:
			adm.Allowed = true
			return nil
		case k.State == StateHalfOpen && k.liveClaim(now) && jobID != 0 && k.ProbeJobID != nil && *k.ProbeJobID == jobID:
			// The job dispatched as the probe: hand it the claim and
			// restart the lease from now.
			adm.Allowed, adm.Probe, adm.Token = true, true, *k.ProbeOwner
			return s.claim(ctx, tx, b, key, k.Generation, *k.ProbeOwner, jobID, now)
		case k.State == StateHalfOpen && k.liveClaim(now):
			adm.Wait = k.ProbeLeaseUntil.Sub(now)
			return nil
		case k.State == StateOpen && k.ProbeAt != nil && k.ProbeAt.After(now):
			adm.Wait = k.ProbeAt.Sub(now)
			return nil
		default: // open and due, or half-open with an expired claim
			adm.Allowed, adm.Probe, adm.Token, adm.State = true, true, newToken(), StateHalfOpen
			return s.claim(ctx, tx, b, key, k.Generation, adm.Token, jobID, now)
		}
	})
	if err != nil {
		return Admission{}, fmt.Errorf("keys: admit %s: %w", key, err)
	}
	return adm, nil
}

func (s *Store) claim(ctx context.Context, tx pgx.Tx, b Breaker, key string, gen int64, token string, jobID int64, now time.Time) error {
	return ledger.ClaimProbe(ctx, tx, b, key, gen, token, jobID, now.Add(s.cfg.ProbeLease), now)
}

// Trip records that a call admitted with adm saw the key exhausted. From
// closed (in adm's generation) it opens the breaker: generation+1, opened_at
// now, probe_at now+probeInterval. It returns true only for that transition,
// so exactly one caller in the fleet raises the key_exhausted alert.
//
// While the breaker is already open or half-open, or when adm is from an
// older generation, Trip changes nothing (late failures of calls that were
// in flight when the breaker opened). If adm is the probe, Trip is
// ProbeResult(adm, false).
func (s *Store) Trip(ctx context.Context, key string, adm Admission, reason string, probeInterval time.Duration) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	if adm.Probe && adm.Breaker == BreakerExhausted {
		_, err := s.ProbeResult(ctx, key, adm, false, probeInterval)
		return false, err
	}
	var opened bool
	err := s.locked(ctx, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
		if k.State != StateClosed || k.Generation != adm.Generation {
			return nil
		}
		opened = true
		return ledger.OpenBreaker(ctx, tx, BreakerExhausted, key, k.Generation, now, now.Add(probeInterval), reason, nil)
	})
	if err != nil {
		return false, fmt.Errorf("keys: trip %s: %w", key, err)
	}
	return opened, nil
}

// ProbeResult records the outcome of the probe admitted as adm (of either
// breaker, adm.Breaker): success closes the breaker (generation+1); failure
// opens it again (generation+1) with the next probe at now+next, and next
// becomes the breaker's cooldown. It returns false, changing nothing, when
// adm no longer holds the claim: another generation, a claim re-taken after
// adm's lease ran out, a Reset.
func (s *Store) ProbeResult(ctx context.Context, key string, adm Admission, success bool, next time.Duration) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	var applied bool
	err := s.lockedIn(ctx, adm.Breaker, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
		if !holds(k, adm) {
			return nil
		}
		applied = true
		if success {
			return ledger.CloseBreaker(ctx, tx, adm.Breaker, key, k.Generation, now)
		}
		if err := ledger.ReopenBreaker(ctx, tx, adm.Breaker, key, k.Generation, now, next); err != nil {
			return err
		}
		return s.returnProbeJob(ctx, tx, key, k)
	})
	if err != nil {
		return false, fmt.Errorf("keys: probe result %s: %w", key, err)
	}
	return applied, nil
}

// ReleaseProbe gives back the probe claim of adm without a verdict, for an
// outcome that says nothing about what the breaker guards (gobreaker's
// IsExcluded), or a run that ended before its call. The breaker goes back to
// open in the same generation with the next probe at now+retryIn. It
// returns false when adm no longer holds the claim.
func (s *Store) ReleaseProbe(ctx context.Context, key string, adm Admission, retryIn time.Duration) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	var applied bool
	err := s.lockedIn(ctx, adm.Breaker, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
		if !holds(k, adm) {
			return nil
		}
		applied = true
		if err := ledger.ReleaseProbe(ctx, tx, adm.Breaker, key, k.Generation, now, now.Add(retryIn)); err != nil {
			return err
		}
		return s.returnProbeJob(ctx, tx, key, k)
	})
	if err != nil {
		return false, fmt.Errorf("keys: release probe %s: %w", key, err)
	}
	return applied, nil
}

// ReleaseProbeOfJob gives back a probe claim made on behalf of jobID (by a
// Supervisor's dispatch) that the job never took: a dispatched probe job
// that ends before its admission (dead-lettered by the checks that run
// first) must not hold the key half-open until the lease runs out. The next
// probe may go at once. It returns whether a claim was released.
func (s *Store) ReleaseProbeOfJob(ctx context.Context, key string, jobID int64) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	var released bool
	for _, b := range []Breaker{BreakerExhausted, BreakerStorm} {
		ok, err := ledger.ReleaseProbeOfJob(ctx, s.pool, b, key, jobID, s.now())
		if err != nil {
			return released, fmt.Errorf("keys: release probe of job %d on %s: %w", jobID, key, err)
		}
		released = released || ok
	}
	return released, nil
}

// StormFailure records a transient failure of a call admitted as adm (not a
// probe) on the storm breaker. With trip set (this process's breaker decided
// the key is in a storm) a closed breaker of adm's generation opens: generation+1,
// cooldown first, next probe at now+first. Either way it reports whether the
// breaker is open now and how long until its next probe, so the failed job
// parks instead of retrying into the storm.
func (s *Store) StormFailure(ctx context.Context, key string, adm Admission, trip bool, reason string, first time.Duration) (StormReport, error) {
	if err := checkKey(key); err != nil {
		return StormReport{}, err
	}
	var rep StormReport
	err := s.lockedIn(ctx, BreakerStorm, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
		if k.State == StateClosed {
			if !trip || k.Generation != adm.StormGeneration {
				return nil
			}
			rep = StormReport{Opened: true, Open: true, Wait: first, Generation: k.Generation + 1}
			return ledger.OpenBreaker(ctx, tx, BreakerStorm, key, k.Generation, now, now.Add(first), reason, &first)
		}
		rep = StormReport{Open: true, Generation: k.Generation, Wait: time.Duration(k.CooldownMS) * time.Millisecond}
		if k.ProbeAt != nil && k.ProbeAt.After(now) {
			rep.Wait = k.ProbeAt.Sub(now)
		}
		return nil
	})
	if err != nil {
		return StormReport{}, fmt.Errorf("keys: storm failure %s: %w", key, err)
	}
	return rep, nil
}

// StormReport is what the storm breaker says after hearing a call.
type StormReport struct {
	// Opened: this call opened the breaker.
	Opened bool
	// Open: the breaker is open (or half-open) after this call: park, do not
	// retry into the storm.
	Open bool
	// Wait is how long until its next probe (Open).
	Wait time.Duration
	// Closed: this call was the probe and closed the breaker.
	Closed bool
	// Generation of the breaker after the call (Opened).
	Generation int64
}

// returnProbeJob moves the job of a failed or released probe from
// ProbeQueueName(key) back to QueueName(key) (paused) while it is still
// running, so that its snooze lands it there rather than in the probe queue,
// where it would be fetched again at once.
func (s *Store) returnProbeJob(ctx context.Context, tx pgx.Tx, key string, k *keyState) error {
	if k.ProbeJobID == nil {
		return nil
	}
	return rivertable.MoveQueue(ctx, tx, s.cfg.RiverSchema, *k.ProbeJobID, ProbeQueueName(key), QueueName(key))
}

// generation is the generation of adm's breaker when it was admitted.
func (adm Admission) generation() int64 {
	if adm.Breaker == BreakerStorm {
		return adm.StormGeneration
	}
	return adm.Generation
}

func holds(k *keyState, adm Admission) bool {
	return adm.Probe && k.State == StateHalfOpen && k.Generation == adm.generation() &&
		k.ProbeOwner != nil && *k.ProbeOwner == adm.Token
}

// Reset is the manual resume (`triage keys resume KEY`): it closes both
// breakers (generation+1, so results of calls admitted before are ignored)
// and ends any pause of the key. The Supervisors then resume its River queue.
func (s *Store) Reset(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	for _, b := range []Breaker{BreakerStorm, BreakerExhausted} {
		err := s.lockedIn(ctx, b, key, func(tx pgx.Tx, k *keyState, now time.Time) error {
			if k.State != StateClosed {
				if err := ledger.CloseBreaker(ctx, tx, b, key, k.Generation, now); err != nil {
					return err
				}
			}
			if b != BreakerExhausted {
				return nil
			}
			return ledger.EndKeyPause(ctx, tx, key, now)
		})
		if err != nil {
			return fmt.Errorf("keys: reset %s: %w", key, err)
		}
	}
	return nil
}

// locked runs fn in a short transaction holding key's triage_key_state row
// lock (the row is created closed if missing). now is the transaction's time
// (the Clock's, or the database's).
func (s *Store) locked(ctx context.Context, key string, fn func(tx pgx.Tx, k *keyState, now time.Time) error) error {
	return s.lockedIn(ctx, BreakerExhausted, key, fn)
}

// lockedIn is locked on breaker b's row.
func (s *Store) lockedIn(ctx context.Context, b Breaker, key string, fn func(tx pgx.Tx, k *keyState, now time.Time) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, now, err := ledger.LockBreaker(ctx, tx, b, key, s.now())
		if err != nil {
			return err
		}
		return fn(tx, &keyState{BreakerRow: row, State: State(row.State)}, now)
	})
}
