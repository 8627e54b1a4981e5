package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a batch's night looked like, for the timeline on its web page: its
// attempts summed per time bucket and class, and the alerts raised about
// it or its key meanwhile.

// BatchTimeSpan is when a batch's first attempt started and its last one
// started or finished; ok false when it has no attempt.
func BatchTimeSpan(ctx context.Context, db DBTX, batch string) (first, last time.Time, ok bool, err error) {
	var f, l *time.Time
	err = db.QueryRow(ctx, `SELECT min(started_at), max(greatest(started_at, coalesce(finished_at, started_at)))
		FROM triage_attempt WHERE batch = $1`, batch).Scan(&f, &l)
	if err != nil {
		return time.Time{}, time.Time{}, false, fmt.Errorf("ledger: time span of batch %q: %w", batch, err)
	}
	if f == nil || l == nil {
		return time.Time{}, time.Time{}, false, nil
	}
	return *f, *l, true, nil
}

// TimelineRow is one class's attempts started in one bucket of a batch's
// timeline: bucket n covers [origin + n·width, origin + (n+1)·width).
type TimelineRow struct {
	Bucket int
	// Class is the attempt's class; "" for attempts with none recorded (in
	// flight, or resolved before finishing).
	Class string
	Calls int
	// SpendUSD is the billed cost; PossiblyBilledUSD the estimate of the
	// attempts whose outcome is unknown.
	SpendUSD          float64
	PossiblyBilledUSD float64
}

// BatchTimeline sums the batch's attempts by the bucket their start falls
// in and by class, buckets of width from origin, in bucket order. Attempts
// before origin are left out.
func BatchTimeline(ctx context.Context, db DBTX, batch string, origin time.Time, width time.Duration) ([]TimelineRow, error) {
	if width <= 0 {
		return nil, fmt.Errorf("ledger: timeline of batch %q: bucket width %s", batch, width)
	}
	rows, err := db.Query(ctx, `SELECT floor(extract(epoch FROM started_at - $2::timestamptz) * 1e6 / $3::bigint)::int AS bucket,
			coalesce(class, ''), count(*), coalesce(sum(cost_usd), 0)::float8,
			coalesce(sum(est_cost_usd) FILTER (WHERE status = 'possibly_billed' OR (status = 'intent' AND mode <> '`+ModeBatch+`')), 0)::float8
		FROM triage_attempt WHERE batch = $1 AND started_at >= $2
		GROUP BY 1, 2 ORDER BY 1, 2`, batch, origin, width.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("ledger: timeline of batch %q: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TimelineRow, error) {
		var t TimelineRow
		err := r.Scan(&t.Bucket, &t.Class, &t.Calls, &t.SpendUSD, &t.PossiblyBilledUSD)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: timeline of batch %q: %w", batch, err)
	}
	return out, nil
}

// AlertRow is one raised alert as triage_alert keeps it.
type AlertRow struct {
	Kind      string
	Key       string
	Batch     string
	Message   string
	CreatedAt time.Time
}

// AlertsAbout returns the alerts raised about key or batch (either may be
// "" to match none) created in [from, to], oldest first, at most limit
// (0: 1000).
func AlertsAbout(ctx context.Context, db DBTX, key, batch string, from, to time.Time, limit int) ([]AlertRow, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := db.Query(ctx, `SELECT kind, key, batch, message, created_at FROM triage_alert
		WHERE ((key = $1 AND $1 <> '') OR (batch = $2 AND $2 <> '')) AND created_at BETWEEN $3 AND $4
		ORDER BY created_at, id LIMIT $5`, key, batch, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("ledger: alerts about %q/%q: %w", key, batch, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AlertRow, error) {
		var a AlertRow
		err := r.Scan(&a.Kind, &a.Key, &a.Batch, &a.Message, &a.CreatedAt)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: alerts about %q/%q: %w", key, batch, err)
	}
	return out, nil
}

// RecordAlert keeps one raised alert as a triage_alert row, with fields
// (nil: none) as its JSON object.
func RecordAlert(ctx context.Context, db DBTX, a AlertRow, fields map[string]any) error {
	if fields == nil {
		fields = map[string]any{}
	}
	if _, err := db.Exec(ctx, `
INSERT INTO triage_alert (kind, key, batch, message, fields, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		a.Kind, a.Key, a.Batch, a.Message, fields, a.CreatedAt); err != nil {
		return fmt.Errorf("ledger: record alert %s: %w", a.Kind, err)
	}
	return nil
}
