package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReasonCacheHit is the reason of an attempt answered from the response
// cache: status and class ok, no call, $0.
const ReasonCacheHit = "cache_hit"

// CachedResponse is the response cache's answer to one request.
type CachedResponse struct {
	// Hit: an answer is stored and has not expired.
	Hit bool
	// Output is the stored result, as StoreResult keeps it.
	Output json.RawMessage
	// AttemptID is the paid attempt the answer came from.
	AttemptID int64
}

// CacheEntry says where StoreResultCached keeps the answer.
type CacheEntry struct {
	// Key is the request's cache key (vendor and request hash, never batch
	// or record). "" stores no cache row.
	Key string
	// TTL is how long the answer is used; it must be positive.
	TTL time.Duration
	// Now pins the start of the TTL; zero: the database clock.
	Now time.Time
}

const cacheLookupSQL = `SELECT output, attempt_id FROM triage_response_cache
	WHERE cache_key = $1 AND expires_at > coalesce($2, now())`

// LookupResponse reads the unexpired answer stored under cacheKey as of now
// (zero: the database clock). A miss is the zero CachedResponse, not an
// error.
func LookupResponse(ctx context.Context, db DBTX, cacheKey string, now time.Time) (CachedResponse, error) {
	var c CachedResponse
	err := db.QueryRow(ctx, cacheLookupSQL, cacheKey, nowArg(now)).Scan(&c.Output, &c.AttemptID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return CachedResponse{}, nil
	case err != nil:
		return CachedResponse{}, fmt.Errorf("ledger: response cache look-up: %w", err)
	}
	c.Hit = true
	return c, nil
}

// QueueLookupResponse queues LookupResponse's read on b, so that the worker
// sends it in the round trip it makes anyway before a call (with the
// breakers' admission and the prior look-up). dst is filled when the
// batch's results are read; an error is returned from the batch's Close.
func QueueLookupResponse(b *pgx.Batch, dst *CachedResponse, cacheKey string, now time.Time) {
	b.Queue(cacheLookupSQL, cacheKey, nowArg(now)).QueryRow(func(row pgx.Row) error {
		var c CachedResponse
		err := row.Scan(&c.Output, &c.AttemptID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			*dst = CachedResponse{}
			return nil
		case err != nil:
			return fmt.Errorf("ledger: response cache look-up: %w", err)
		}
		c.Hit = true
		*dst = c
		return nil
	})
}

// StoreResultCached is StoreResult that also keeps the answer in the
// response cache under e.Key for e.TTL, in the same statement (no extra
// round trip in the completion transaction). A newer answer replaces an
// older one and restarts its TTL: a run with fresh calls (--no-cache)
// refreshes the cache. With e.Key "" it is StoreResult.
func StoreResultCached(ctx context.Context, db DBTX, batch, recordID string, attemptID int64, output json.RawMessage, e CacheEntry) error {
	if e.Key == "" {
		return StoreResult(ctx, db, batch, recordID, attemptID, output)
	}
	if e.TTL <= 0 {
		return fmt.Errorf("ledger: store result %s/%s: cache ttl %s is not positive", batch, recordID, e.TTL)
	}
	_, err := db.Exec(ctx, `WITH res AS (
		INSERT INTO triage_result (batch, record_id, attempt_id, output)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (batch, record_id) DO NOTHING
	)
	INSERT INTO triage_response_cache (cache_key, output, attempt_id, created_at, expires_at)
	VALUES ($5, $4, $3, coalesce($6, now()), coalesce($6, now()) + make_interval(secs => $7))
	ON CONFLICT (cache_key) DO UPDATE SET output = EXCLUDED.output, attempt_id = EXCLUDED.attempt_id,
		created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at`,
		batch, recordID, attemptID, []byte(output), e.Key, nowArg(e.Now), e.TTL.Seconds())
	if err != nil {
		return fmt.Errorf("ledger: store result %s/%s: %w", batch, recordID, err)
	}
	return nil
}

// RecordCacheHit writes the attempt of a request answered from the response
// cache (status and class ok, reason cache_hit, no tokens, $0) and stores
// output as the record's result, in one statement, and returns the
// attempt's id. Call it in the transaction of River's JobCompleteTx, like
// StoreResult. in.EstCostUSD, in.InFlightFor and in.IsRetry are ignored: no
// call is made, so nothing is reserved, estimated or retried.
func RecordCacheHit(ctx context.Context, db DBTX, in Intent, output json.RawMessage) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `WITH a AS (
		INSERT INTO triage_attempt
			(batch, record_id, job_id, attempt, key, model, idempotency_key, request_hash,
			 status, class, reason, started_at, finished_at, change)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'ok', 'ok', $9, coalesce($10, now()), coalesce($10, now()), $12)
		RETURNING id
	), res AS (
		INSERT INTO triage_result (batch, record_id, attempt_id, output)
		SELECT $1, $2, a.id, $11 FROM a
		ON CONFLICT (batch, record_id) DO NOTHING
	)
	SELECT id FROM a`,
		in.Batch, in.RecordID, in.JobID, in.Attempt, in.Key, in.Model, in.IdempotencyKey, in.RequestHash,
		ReasonCacheHit, nowArg(in.Now), []byte(output), in.Change).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("ledger: cache hit %s/%s: %w", in.Batch, in.RecordID, err)
	}
	return id, nil
}

// cacheSweepLockClass is the first key of SweepResponseCache's advisory
// lock ("cach"); the second is the schema's hash, as for FoldSpend.
const cacheSweepLockClass int32 = 0x63616368

// SweepResponseCache deletes up to limit response-cache rows expired as of
// now (zero: the database clock) and returns how many it deleted. Every
// worker process calls it periodically; one at a time does the work (a
// transaction-scoped advisory lock), the others return 0 at once. The limit
// keeps one sweep short after a long pause; the next sweep takes the rest.
func SweepResponseCache(ctx context.Context, db DBTX, now time.Time, limit int) (int, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("ledger: sweep response cache: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))`, cacheSweepLockClass).Scan(&mine); err != nil {
		return 0, fmt.Errorf("ledger: sweep response cache: lock: %w", err)
	}
	if !mine {
		return 0, nil
	}
	tag, err := tx.Exec(ctx, `DELETE FROM triage_response_cache WHERE cache_key IN (
		SELECT cache_key FROM triage_response_cache WHERE expires_at <= coalesce($1, now())
		ORDER BY expires_at LIMIT $2)`, nowArg(now), limit)
	if err != nil {
		return 0, fmt.Errorf("ledger: sweep response cache: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("ledger: sweep response cache: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
