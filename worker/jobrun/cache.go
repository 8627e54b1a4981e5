package jobrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/triage-dev/triage/ledger"
)

// The response cache (pipeline option cache = true): an answer paid for once
// is kept under the hash of the request that bought it, and an identical
// request, in any batch, is answered from it without a call. The look-up
// rides in the round trip the worker makes anyway before a call (the
// breakers' admission and the prior look-up); a hit is decided by
// decide.Before (ReactCacheHit) and carried out by apply in the completion
// transaction; a fresh answer is stored in the statement that stores the
// record's result.

// cacheKey is the response cache's key for a request: its vendor (which
// wire format, which model catalogue) and its content hash, which covers
// model, system, prompt and every parameter but never the batch, the record
// or the idempotency key. The idempotency key stays per record.
func cacheKey(vendor, requestHash string) string {
	h := sha256.New()
	writeLenPrefixed(h, "triage-cache-v1")
	writeLenPrefixed(h, vendor)
	writeLenPrefixed(h, requestHash)
	return hex.EncodeToString(h.Sum(nil))
}

func writeLenPrefixed(w io.Writer, s string) {
	fmt.Fprintf(w, "%d:%s", len(s), s)
}

// setCacheKey sets the call's cache key once the request is rendered, for
// a pipeline that caches (stored after a fresh answer even under --no-cache,
// which asks for a fresh answer, not for forgetting it).
func (c *call) setCacheKey() {
	if c.pipeline.Cache && c.key != nil {
		c.cacheKey = cacheKey(c.key.cfg.Vendor, c.hash)
	}
}

// queueCacheLookup queues the cache look-up on the pre-call batch when the
// job may be answered from the cache; for other pipelines it queues
// nothing, so their path is unchanged.
func (r *Runner) queueCacheLookup(b *pgx.Batch, c *call) {
	if c.cacheKey == "" || c.job.Args.NoCache {
		return
	}
	ledger.QueueLookupResponse(b, &c.cached, c.cacheKey, r.pinnedNow())
}

// storeResult stores the record's fresh answer, and keeps it in the
// response cache when the pipeline caches and the answer is whole.
func (r *Runner) storeResult(ctx context.Context, tx pgx.Tx, c *call) error {
	return ledger.StoreResultCached(ctx, tx, c.job.Args.Batch, c.job.Args.RecordID, c.attemptID, c.output,
		ledger.CacheEntry{Key: c.storeCacheKey(), TTL: c.pipeline.CacheTTL, Now: r.pinnedNow()})
}

// storeCacheKey is the key the call's answer is kept under in the response
// cache, "" for none: the one rule for what the cache may hold. Only a
// whole answer is kept. An accepted partial (a cut stream stored as the
// record's result, marked partial) is not: served from the cache it would
// reach every later batch with the same request as an ordinary, unmarked
// cache_hit, so the next such request calls the provider instead.
func (c *call) storeCacheKey() string {
	if c.partialAccepted {
		return ""
	}
	return c.cacheKey
}

// storeCacheHit records the $0 cache_hit attempt and stores the cached
// answer as the record's result, inside the completion transaction.
func (r *Runner) storeCacheHit(ctx context.Context, tx pgx.Tx, c *call) error {
	job := c.job
	id, err := ledger.RecordCacheHit(ctx, tx, ledger.Intent{
		Batch: job.Args.Batch, RecordID: job.Args.RecordID, JobID: job.ID, Attempt: c.calls + 1,
		Key: c.key.cfg.Name, Model: c.model.Name, IdempotencyKey: c.req.IdempotencyKey, RequestHash: c.hash,
		Change: changeLabel(c.change), Now: r.pinnedNow(),
	}, c.cached.Output)
	if err != nil {
		return err
	}
	r.log.DebugContext(ctx, "cache hit", "key", c.key.cfg.Name, "job_id", job.ID, "batch", job.Args.Batch,
		"record_id", job.Args.RecordID, "attempt_id", id, "source_attempt_id", c.cached.AttemptID)
	return nil
}

// pinnedNow is the injected clock's time, or zero for the database clock.
func (r *Runner) pinnedNow() (t time.Time) {
	if r.opts.Clock != nil {
		return r.opts.Clock.Now()
	}
	return t
}
