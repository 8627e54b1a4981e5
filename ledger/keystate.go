package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Breaker names one of a key's two breakers, each a table of one row per
// key with the same columns: the exhausted breaker (triage_key_state) and
// the storm breaker (triage_storm_state). worker/keys decides their
// transitions; the statements here carry them out.
//
// The rows keep gobreaker's rules. A missing row is closed in generation 0.
// Every transition but claiming a probe bumps the generation, so a result
// from an older generation is recognised and discarded. The probe claim
// (probe_owner, probe_job_id, probe_lease_until) is set only half-open and
// cleared by every other transition. Each writing function here changes a
// row only in the generation it is given, the one its caller read under the
// row lock (LockBreaker): a caller that lost the row changes nothing.
type Breaker int

// The two breakers, in worker/keys' order.
const (
	BreakerExhausted Breaker = iota
	BreakerStorm
)

// String returns the breaker's name: exhausted or storm.
func (b Breaker) String() string {
	if b == BreakerStorm {
		return "storm"
	}
	return "exhausted"
}

// table is the breaker's state table.
func (b Breaker) table() string {
	if b == BreakerStorm {
		return "triage_storm_state"
	}
	return "triage_key_state"
}

// Breaker states as stored in the state column.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// BreakerRow is one key's row of a breaker table.
type BreakerRow struct {
	State      string
	Generation int64
	OpenedAt   *time.Time
	// ProbeAt is when the next probe may go (open).
	ProbeAt *time.Time
	// The live probe claim (half-open): the claim's token, the job it was
	// made for (nil: unknown) and when it lapses.
	ProbeOwner      *string
	ProbeJobID      *int64
	ProbeLeaseUntil *time.Time
	Reason          string
	UpdatedAt       time.Time
	// CooldownMS is the wait before the next probe (the storm breaker's,
	// which grows while probes fail).
	CooldownMS int64
}

// LockBreaker creates key's row of breaker b closed if missing, locks it
// (FOR UPDATE) and returns it with the transaction's time: now, or the
// database's clock when now is zero. tx must be a transaction: the lock is
// held until it ends, so the caller's decision and the write that follows
// it see no other writer.
func LockBreaker(ctx context.Context, tx DBTX, b Breaker, key string, now time.Time) (BreakerRow, time.Time, error) {
	if _, err := tx.Exec(ctx, `
INSERT INTO `+b.table()+` (key, updated_at) VALUES ($1, coalesce($2::timestamptz, now()))
ON CONFLICT (key) DO NOTHING`, key, nowArg(now)); err != nil {
		return BreakerRow{}, time.Time{}, fmt.Errorf("ledger: lock breaker of key %q: %w", key, err)
	}
	var r BreakerRow
	var at time.Time
	err := tx.QueryRow(ctx, `
SELECT state, generation, opened_at, probe_at, probe_owner, probe_job_id, probe_lease_until, reason, updated_at, cooldown_ms,
       coalesce($2::timestamptz, now())
FROM `+b.table()+` WHERE key = $1 FOR UPDATE`, key, nowArg(now)).Scan(
		&r.State, &r.Generation, &r.OpenedAt, &r.ProbeAt, &r.ProbeOwner, &r.ProbeJobID, &r.ProbeLeaseUntil,
		&r.Reason, &r.UpdatedAt, &r.CooldownMS, &at)
	if err != nil {
		return BreakerRow{}, time.Time{}, fmt.Errorf("ledger: lock breaker of key %q: %w", key, err)
	}
	return r, at, nil
}

// ClaimProbe makes breaker b of key half-open with the probe claim token,
// for job jobID (0: unknown) until leaseUntil, in generation gen (a claim
// does not bump it).
func ClaimProbe(ctx context.Context, db DBTX, b Breaker, key string, gen int64, token string, jobID int64, leaseUntil, now time.Time) error {
	var job *int64
	if jobID != 0 {
		job = &jobID
	}
	_, err := db.Exec(ctx, `
UPDATE `+b.table()+`
SET state = 'half_open', probe_owner = $3, probe_job_id = $4, probe_lease_until = $5, updated_at = $6
WHERE key = $1 AND generation = $2`,
		key, gen, token, job, leaseUntil, now)
	if err != nil {
		return fmt.Errorf("ledger: claim probe of key %q: %w", key, err)
	}
	return nil
}

// OpenBreaker opens breaker b of key from generation gen: generation+1,
// opened at now for reason, next probe at probeAt, no claim. cooldown, when
// not nil, becomes the breaker's cooldown; nil leaves it.
func OpenBreaker(ctx context.Context, db DBTX, b Breaker, key string, gen int64, now, probeAt time.Time, reason string, cooldown *time.Duration) error {
	var ms *int64
	if cooldown != nil {
		v := cooldown.Milliseconds()
		ms = &v
	}
	_, err := db.Exec(ctx, `
UPDATE `+b.table()+`
SET state = 'open', generation = generation + 1, opened_at = $3, probe_at = $4, cooldown_ms = coalesce($6, cooldown_ms),
    probe_owner = NULL, probe_job_id = NULL, probe_lease_until = NULL, reason = $5, updated_at = $3
WHERE key = $1 AND generation = $2`, key, gen, now, probeAt, reason, ms)
	if err != nil {
		return fmt.Errorf("ledger: open breaker of key %q: %w", key, err)
	}
	return nil
}

// CloseBreaker closes breaker b of key from generation gen (a probe that
// succeeded, a manual resume): generation+1, no probe, no cooldown, no
// reason.
func CloseBreaker(ctx context.Context, db DBTX, b Breaker, key string, gen int64, now time.Time) error {
	_, err := db.Exec(ctx, `
UPDATE `+b.table()+`
SET state = 'closed', generation = generation + 1, opened_at = NULL, probe_at = NULL, cooldown_ms = 0,
    probe_owner = NULL, probe_job_id = NULL, probe_lease_until = NULL, reason = '', updated_at = $3
WHERE key = $1 AND generation = $2`, key, gen, now)
	if err != nil {
		return fmt.Errorf("ledger: close breaker of key %q: %w", key, err)
	}
	return nil
}

// ReopenBreaker opens breaker b of key again after its probe failed, from
// generation gen: generation+1, the next probe at now+next and next the
// cooldown; opened_at and the reason stay.
func ReopenBreaker(ctx context.Context, db DBTX, b Breaker, key string, gen int64, now time.Time, next time.Duration) error {
	_, err := db.Exec(ctx, `
UPDATE `+b.table()+`
SET state = 'open', generation = generation + 1, probe_at = $4, cooldown_ms = $5,
    probe_owner = NULL, probe_job_id = NULL, probe_lease_until = NULL, updated_at = $3
WHERE key = $1 AND generation = $2`, key, gen, now, now.Add(next), next.Milliseconds())
	if err != nil {
		return fmt.Errorf("ledger: reopen breaker of key %q: %w", key, err)
	}
	return nil
}

// ReleaseProbe gives back breaker b's probe claim on key without a
// verdict: open again in the same generation gen, the next probe at
// probeAt.
func ReleaseProbe(ctx context.Context, db DBTX, b Breaker, key string, gen int64, now, probeAt time.Time) error {
	_, err := db.Exec(ctx, `
UPDATE `+b.table()+`
SET state = 'open', probe_at = $3, probe_owner = NULL, probe_job_id = NULL, probe_lease_until = NULL, updated_at = $4
WHERE key = $1 AND generation = $2`, key, gen, probeAt, now)
	if err != nil {
		return fmt.Errorf("ledger: release probe of key %q: %w", key, err)
	}
	return nil
}

// ReleaseProbeOfJob gives back breaker b's probe claim on key made for
// jobID, if there is one: open in the same generation, the next probe at
// now (the database's clock when zero). It reports whether a claim was
// released.
func ReleaseProbeOfJob(ctx context.Context, db DBTX, b Breaker, key string, jobID int64, now time.Time) (bool, error) {
	tag, err := db.Exec(ctx, `
UPDATE `+b.table()+`
SET state = 'open', probe_at = coalesce($3::timestamptz, now()), probe_owner = NULL, probe_job_id = NULL,
    probe_lease_until = NULL, updated_at = coalesce($3::timestamptz, now())
WHERE key = $1 AND state = 'half_open' AND probe_job_id = $2`, key, jobID, nowArg(now))
	if err != nil {
		return false, fmt.Errorf("ledger: release probe of job %d on key %q: %w", jobID, key, err)
	}
	return tag.RowsAffected() > 0, nil
}

// KeyAdmission is what a call's admission reads of its key: both breakers
// and the active pause.
type KeyAdmission struct {
	// State and Generation of each breaker; State nil: no row (closed, 0).
	State, StormState           *string
	Generation, StormGeneration *int64
	// Pause is the active pause; nil: none. It is read only with both
	// breakers, whatever they are: the caller decides what wins.
	Pause *KeyPause
}

// admissionSQL reads both breakers and the active pause of key ($1) at $2
// (or the database's now()).
const admissionSQL = `SELECT s.state, s.generation, st.state, st.generation, p.key, p.reason, p.until, p.set_by, p.created_at
	FROM (SELECT 1) one
	LEFT JOIN triage_key_state s ON s.key = $1
	LEFT JOIN triage_storm_state st ON st.key = $1
	LEFT JOIN triage_pause p ON p.key = $1 AND p.until > coalesce($2::timestamptz, now())`

func (a *KeyAdmission) scan(row pgx.Row) error {
	var (
		pauseKey, reason, setBy *string
		until, created          *time.Time
	)
	if err := row.Scan(&a.State, &a.Generation, &a.StormState, &a.StormGeneration, &pauseKey,
		&reason, &until, &setBy, &created); err != nil {
		return err
	}
	a.Pause = nil
	if pauseKey != nil {
		a.Pause = &KeyPause{Key: *pauseKey, Reason: *reason, Until: *until, SetBy: *setBy, CreatedAt: *created}
	}
	return nil
}

// ReadKeyAdmission reads key's admission at now (the database's clock when
// zero) in one statement.
func ReadKeyAdmission(ctx context.Context, db DBTX, key string, now time.Time) (KeyAdmission, error) {
	var a KeyAdmission
	if err := a.scan(db.QueryRow(ctx, admissionSQL, key, nowArg(now))); err != nil {
		return KeyAdmission{}, fmt.Errorf("ledger: admission of key %q: %w", key, err)
	}
	return a, nil
}

// QueueKeyAdmission queues ReadKeyAdmission on b, to be sent in one round
// trip with other reads; dst is filled when b's results are read.
func QueueKeyAdmission(b *pgx.Batch, dst *KeyAdmission, key string, now time.Time) {
	b.Queue(admissionSQL, key, nowArg(now)).QueryRow(func(row pgx.Row) error {
		if err := dst.scan(row); err != nil {
			return fmt.Errorf("ledger: admission of key %q: %w", key, err)
		}
		return nil
	})
}

// KeyBreakers is a key's two breakers and its active pause, as `triage
// keys` shows them.
type KeyBreakers struct {
	Key string
	// Exhausted and Storm are the breakers' rows (closed in generation 0
	// when the key has none); UpdatedAt is not read.
	Exhausted, Storm BreakerRow
	// Pause is the active pause; nil: none.
	Pause *KeyPause
	// Now is the time the rows were read at.
	Now time.Time
}

const keyBreakersSQL = `
WITH now AS (SELECT coalesce($1::timestamptz, now()) AS t),
k AS (SELECT key FROM triage_key_state UNION SELECT key FROM triage_storm_state UNION SELECT key FROM triage_pause)
SELECT k.key, coalesce(s.state, 'closed'), coalesce(s.generation, 0), coalesce(s.reason, ''),
       s.opened_at, s.probe_at, s.probe_lease_until, s.probe_job_id,
       p.key IS NOT NULL AND p.until > now.t, coalesce(p.reason, ''), p.until, coalesce(p.set_by, ''), p.created_at,
       now.t,
       coalesce(st.state, 'closed'), coalesce(st.generation, 0), coalesce(st.reason, ''),
       st.opened_at, st.probe_at, st.probe_lease_until, st.probe_job_id, coalesce(st.cooldown_ms, 0)
FROM k
LEFT JOIN triage_key_state s ON s.key = k.key
LEFT JOIN triage_storm_state st ON st.key = k.key
LEFT JOIN triage_pause p ON p.key = k.key
CROSS JOIN now
`

func scanKeyBreakers(row pgx.Row) (KeyBreakers, error) {
	var (
		k        KeyBreakers
		paused   bool
		p        KeyPause
		until    *time.Time
		pCreated *time.Time
	)
	if err := row.Scan(&k.Key, &k.Exhausted.State, &k.Exhausted.Generation, &k.Exhausted.Reason, &k.Exhausted.OpenedAt,
		&k.Exhausted.ProbeAt, &k.Exhausted.ProbeLeaseUntil, &k.Exhausted.ProbeJobID,
		&paused, &p.Reason, &until, &p.SetBy, &pCreated, &k.Now,
		&k.Storm.State, &k.Storm.Generation, &k.Storm.Reason, &k.Storm.OpenedAt, &k.Storm.ProbeAt,
		&k.Storm.ProbeLeaseUntil, &k.Storm.ProbeJobID, &k.Storm.CooldownMS); err != nil {
		return KeyBreakers{}, err
	}
	if paused {
		p.Key, p.Until, p.CreatedAt = k.Key, *until, *pCreated
		k.Pause = &p
	}
	return k, nil
}

// ReadKeyBreakers returns key's breakers and pause at now (the database's
// clock when zero). A key never seen is closed in generation 0.
func ReadKeyBreakers(ctx context.Context, db DBTX, key string, now time.Time) (KeyBreakers, error) {
	k, err := scanKeyBreakers(db.QueryRow(ctx, keyBreakersSQL+`WHERE k.key = $2`, nowArg(now), key))
	if errors.Is(err, pgx.ErrNoRows) {
		k = KeyBreakers{Key: key, Exhausted: BreakerRow{State: BreakerClosed}, Storm: BreakerRow{State: BreakerClosed}}
		err = db.QueryRow(ctx, `SELECT coalesce($1::timestamptz, now())`, nowArg(now)).Scan(&k.Now)
	}
	if err != nil {
		return KeyBreakers{}, fmt.Errorf("ledger: breakers of key %q: %w", key, err)
	}
	return k, nil
}

// ListKeyBreakers returns ReadKeyBreakers of every key that has a breaker
// row or a pause, by key.
func ListKeyBreakers(ctx context.Context, db DBTX, now time.Time) ([]KeyBreakers, error) {
	rows, err := db.Query(ctx, keyBreakersSQL+`ORDER BY 1`, nowArg(now))
	if err != nil {
		return nil, fmt.Errorf("ledger: list key breakers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyBreakers, error) { return scanKeyBreakers(r) })
	if err != nil {
		return nil, fmt.Errorf("ledger: list key breakers: %w", err)
	}
	return out, nil
}
