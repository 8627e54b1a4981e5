package batchapi

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/triage-dev/triage/worker/provider"
)

// FindClockSkew is how much older than Find's since a batch may look, by
// the provider's own created_at, and still be considered: the provider's
// clock is not the caller's. Generous, because a batch the look-up misses
// is created again whole (up to 50,000 lines, all billed twice), while a
// wider window only lists a few more batches: a worker host's clock
// minutes ahead of the provider's once cut the window short of the batch
// it was looking for. Callers pass a since from one clock the fleet shares
// (the database's), not a host's.
const FindClockSkew = time.Hour

var (
	// ErrInvalidID: an id given to Get, Cancel or Create is empty or has
	// characters no vendor id has. No call was made.
	ErrInvalidID = errors.New("batchapi: invalid id")
	// ErrNotEnded: Results was given a batch that has not ended.
	ErrNotEnded = errors.New("batchapi: the batch has not ended")
)

// checkID keeps ids to the characters vendors use, so that an id can never
// turn one route into another (an empty id would list batches).
func checkID(what, id string) error {
	if id == "" || len(id) > 256 {
		return fmt.Errorf("%w: %s must have 1 to 256 characters", ErrInvalidID, what)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%w: %s has a character outside [A-Za-z0-9._-]", ErrInvalidID, what)
		}
	}
	return nil
}

func checkTag(tag string) error {
	if len(tag) > MaxTagLen {
		return fmt.Errorf("%w: tag longer than %d bytes", ErrInvalidLines, MaxTagLen)
	}
	return nil
}

// upload sends the lines as OpenAI's batch input file (POST /files,
// purpose=batch) and returns its id; record it before calling Create, so a
// crash between the two leaves a file, not a batch, unaccounted for.
// Anthropic has no file step: it returns "", nil without a call.
func (c *Client) upload(ctx context.Context, lines []Line, tag string) (fileID string, err error) {
	if c.format == provider.FormatAnthropic {
		return "", nil
	}
	if err := checkTag(tag); err != nil {
		return "", err
	}
	return c.openAIUpload(ctx, lines, tag)
}

// create starts a batch. OpenAI: from the uploaded file, with tag as
// metadata.triage_provider_batch so that Find can recognise it; lines are
// not used. Anthropic: from lines, sent inline; fileID and tag are not used
// (Anthropic batches have no metadata).
func (c *Client) create(ctx context.Context, fileID string, lines []Line, tag string) (Batch, error) {
	if c.format == provider.FormatAnthropic {
		return c.anthropicCreate(ctx, lines)
	}
	if err := checkTag(tag); err != nil {
		return Batch{}, err
	}
	return c.openAICreate(ctx, fileID, tag)
}

// get polls a batch.
func (c *Client) get(ctx context.Context, id string) (Batch, error) {
	if err := checkID("batch id", id); err != nil {
		return Batch{}, err
	}
	if c.format == provider.FormatAnthropic {
		return c.anthropicBatchCall(ctx, "get", http.MethodGet, c.endpoint(nil, "messages", "batches", id), nil)
	}
	return c.openAIBatchCall(ctx, "get", http.MethodGet, c.endpoint(nil, "batches", id), nil)
}

// cancel asks the vendor to stop a batch. It answers at once with the batch
// cancelling (OpenAI) or canceling (Anthropic); poll Get until Ended, then
// read Results: lines that had run are there, the others come back canceled
// (Anthropic) or are missing (OpenAI), and neither ran.
func (c *Client) cancel(ctx context.Context, id string) (Batch, error) {
	if err := checkID("batch id", id); err != nil {
		return Batch{}, err
	}
	if c.format == provider.FormatAnthropic {
		return c.anthropicBatchCall(ctx, "cancel", http.MethodPost, c.endpoint(nil, "messages", "batches", id, "cancel"), nil)
	}
	return c.openAIBatchCall(ctx, "cancel", http.MethodPost, c.endpoint(nil, "batches", id, "cancel"), nil)
}

// Known reports whether a provider batch id is recorded already, as the
// batch of another provider batch row: Find skips it.
type Known func(ctx context.Context, id string) (bool, error)

// find looks for a batch an earlier process created but crashed before
// recording. OpenAI: the batch whose metadata.triage_provider_batch is tag,
// among those created since since (zero: all). Anthropic, which has no
// metadata: a batch created since since with len(customIDs) requests whose
// results hold exactly customIDs; while such a candidate has not ended it
// cannot be checked, and Find returns it with ErrUnconfirmed (found false):
// neither resubmit nor record it yet, ask again later. Found false with a
// nil error means no such batch exists: resubmitting is safe. See doc.go for
// the limits. A batch known reports as recorded already (another row's) is
// never a candidate; known may be nil.
func (c *Client) find(ctx context.Context, tag string, since time.Time, customIDs []string, known Known) (Batch, bool, error) {
	if c.format == provider.FormatAnthropic {
		if len(customIDs) == 0 {
			return Batch{}, false, fmt.Errorf("%w: find needs the custom_ids of the batch", ErrInvalidLines)
		}
		return c.anthropicFind(ctx, since, customIDs, known)
	}
	if tag == "" {
		return Batch{}, false, fmt.Errorf("%w: find needs the tag the batch was created with", ErrInvalidLines)
	}
	return c.openAIFind(ctx, tag, since, known)
}

// results streams every result line of an ended batch, in the provider's
// order (not the input order: match on CustomID). OpenAI: the output file,
// then the error file; a failed batch has none. Anthropic: the results
// JSONL. A download that fails yields a *CallError and ends the sequence; a
// line that cannot be read yields ErrMalformedResult and the sequence goes
// on. A custom_id that never comes back did not run.
func (c *Client) results(ctx context.Context, b Batch) iter.Seq2[Result, error] {
	return func(yield func(Result, error) bool) {
		switch {
		case !b.Ended:
			yield(Result{}, fmt.Errorf("results of %s: %w", b.ID, ErrNotEnded))
		case c.format == provider.FormatAnthropic:
			if err := checkID("batch id", b.ID); err != nil {
				yield(Result{}, err)
				return
			}
			c.anthropicResults(ctx, b, yield)
		default:
			c.openAIResults(ctx, b, yield)
		}
	}
}
