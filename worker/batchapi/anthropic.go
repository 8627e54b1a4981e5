package batchapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/triage-dev/triage/worker/provider"
)

// The Anthropic Message Batches API: requests inline in the create call,
// results streamed as JSONL once processing_status is "ended". Shapes:
// anthropic-sdk-go's messagebatch.go (docs/batch-api.md).

type anthropicBatchWire struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	ProcessingStatus string `json:"processing_status"`
	RequestCounts    struct {
		Processing int `json:"processing"`
		Succeeded  int `json:"succeeded"`
		Errored    int `json:"errored"`
		Canceled   int `json:"canceled"`
		Expired    int `json:"expired"`
	} `json:"request_counts"`
	EndedAt    *time.Time `json:"ended_at"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	ResultsURL *string    `json:"results_url"`
}

func (w *anthropicBatchWire) batch() Batch {
	rc := w.RequestCounts
	b := Batch{
		ID: w.ID, VendorStatus: w.ProcessingStatus, Ended: w.ProcessingStatus == "ended",
		Counts: Counts{Processing: rc.Processing, Succeeded: rc.Succeeded, Errored: rc.Errored,
			Canceled: rc.Canceled, Expired: rc.Expired},
		ResultsURL: deref(w.ResultsURL), CreatedAt: w.CreatedAt.UTC(), ExpiresAt: w.ExpiresAt.UTC(),
	}
	b.Counts.Total = rc.Processing + rc.Succeeded + rc.Errored + rc.Canceled + rc.Expired
	if w.EndedAt != nil {
		b.EndedAt = w.EndedAt.UTC()
	}
	return b
}

func (c *Client) anthropicBatchCall(ctx context.Context, op, method, u string, body []byte) (Batch, error) {
	ct := ""
	if body != nil {
		ct = "application/json"
	}
	var w anthropicBatchWire
	if err := c.callJSON(ctx, op, method, u, ct, body, &w, func() bool { return w.ID != "" && w.ProcessingStatus != "" }); err != nil {
		return Batch{}, err
	}
	return w.batch(), nil
}

func (c *Client) anthropicCreate(ctx context.Context, lines []Line) (Batch, error) {
	body, err := c.encodeLines(lines)
	if err != nil {
		return Batch{}, err
	}
	return c.anthropicBatchCall(ctx, "create", http.MethodPost, c.endpoint(nil, "messages", "batches"), body)
}

// anthropicFind pages through the batches created since since (newest
// first) for one with as many requests as customIDs, then confirms it by the
// custom_ids in its results, which exist only once it has ended.
func (c *Client) anthropicFind(ctx context.Context, since time.Time, customIDs []string, known Known) (Batch, bool, error) {
	want := make(map[string]struct{}, len(customIDs))
	for _, id := range customIDs {
		want[id] = struct{}{}
	}
	var pending *Batch
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(listPageSize)}}
		if after != "" {
			q.Set("after_id", after)
		}
		var page struct {
			Data    []anthropicBatchWire `json:"data"`
			HasMore bool                 `json:"has_more"`
		}
		if err := c.callJSON(ctx, "find", http.MethodGet, c.endpoint(q, "messages", "batches"), "", nil, &page, nil); err != nil {
			return Batch{}, false, err
		}
		for i := range page.Data {
			b := page.Data[i].batch()
			if !since.IsZero() && b.CreatedAt.Before(since.Add(-FindClockSkew)) {
				return findOutcome(pending)
			}
			if b.Counts.Total != len(want) {
				continue
			}
			if known != nil {
				// A line sent again keeps its custom_id: an earlier
				// batch of the same lines (one that expired) matches
				// them too, and it is another row's.
				k, err := known(ctx, b.ID)
				if err != nil {
					return Batch{}, false, err
				}
				if k {
					continue
				}
			}
			if !b.Ended {
				if pending == nil {
					pending = &b
				}
				continue
			}
			same, err := c.sameLines(ctx, b, want)
			if err != nil {
				return Batch{}, false, err
			}
			if same {
				return b, true, nil
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return findOutcome(pending)
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

func findOutcome(pending *Batch) (Batch, bool, error) {
	if pending != nil {
		return *pending, false, fmt.Errorf("find %s: %w", pending.ID, ErrUnconfirmed)
	}
	return Batch{}, false, nil
}

// sameLines reports whether the ended batch b holds exactly the custom_ids
// of want: Anthropic writes one result line per request.
func (c *Client) sameLines(ctx context.Context, b Batch, want map[string]struct{}) (bool, error) {
	seen := 0
	same := true
	var failed error
	ok := c.streamLines(ctx, "find", c.anthropicResultsURL(b), func(_ int, raw []byte) bool {
		var ln struct {
			CustomID string `json:"custom_id"`
		}
		if json.Unmarshal(raw, &ln) != nil {
			same = false
			return false
		}
		if _, in := want[ln.CustomID]; !in {
			same = false
			return false
		}
		seen++
		return true
	}, func(_ Result, err error) bool { failed = err; return false })
	if !ok && failed != nil {
		return false, failed
	}
	return same && seen == len(want), nil
}

// anthropicResultsURL is results_url when it points at the configured host,
// else the documented path there: the API key goes to no other host.
func (c *Client) anthropicResultsURL(b Batch) string {
	if b.ResultsURL != "" {
		if u, err := url.Parse(b.ResultsURL); err == nil && u.Scheme == c.base.Scheme && u.Host == c.base.Host {
			return u.String()
		}
	}
	return c.endpoint(nil, "messages", "batches", b.ID, "results")
}

// anthropicErrorStatus is the HTTP status Anthropic documents for each
// error.type (docs.claude.com/en/api/errors). An errored result carries the
// envelope without a status; the Observation gets this one, so the
// classifier sees what the synchronous call would have.
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
	"permission_error": 403, "not_found_error": 404, "request_too_large": 413,
	"rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}

type anthropicResultLine struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	} `json:"result"`
}

func (c *Client) anthropicResults(ctx context.Context, b Batch, yield func(Result, error) bool) {
	c.streamLines(ctx, "results", c.anthropicResultsURL(b), func(n int, raw []byte) bool {
		var ln anthropicResultLine
		if err := json.Unmarshal(raw, &ln); err != nil || ln.CustomID == "" {
			return yield(Result{}, fmt.Errorf("%w: batch %s line %d is not a result line", ErrMalformedResult, b.ID, n))
		}
		switch ln.Result.Type {
		case "succeeded":
			res := provider.DecodeResponse(c.format, c.vendor, c.path, http.StatusOK, map[string]string{}, ln.Result.Message)
			return yield(Result{CustomID: ln.CustomID, Ran: true, Res: res}, nil)
		case "errored":
			var env struct {
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal(ln.Result.Error, &env)
			status, known := anthropicErrorStatus[env.Error.Type]
			if !known {
				// An error type newer than this table: a server error is
				// what the classifier would make of an unknown 5xx.
				status = http.StatusInternalServerError
			}
			h := map[string]string{}
			if env.RequestID != "" {
				h["request-id"] = env.RequestID
			}
			res := provider.DecodeResponse(c.format, c.vendor, c.path, status, h, ln.Result.Error)
			return yield(Result{CustomID: ln.CustomID, Ran: true, Res: res}, nil)
		case "expired":
			return yield(Result{CustomID: ln.CustomID, NotRun: NotRunExpired}, nil)
		case "canceled":
			return yield(Result{CustomID: ln.CustomID, NotRun: NotRunCanceled}, nil)
		default:
			return yield(Result{}, fmt.Errorf("%w: batch %s line %d has result type %q", ErrMalformedResult, b.ID, n, boundType(ln.Result.Type)))
		}
	}, yield)
}

// boundType keeps a vendor's word short for an error string (%q escapes it).
func boundType(s string) string {
	if len(s) > 32 {
		s = s[:32]
	}
	return s
}
