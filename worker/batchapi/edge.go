package batchapi

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/triage-dev/triage/worker/provider"
)

// The Client's public methods are where a provider batch's text enters
// triage, and they pass every byte of it through the key's redaction
// boundary (redact.New of the API key, built by New; no caller can skip
// it): a line's answer, a call's error answer, a batch's fields and
// validation errors, an error's text. What leaves the Client can reach a
// row (triage_provider_batch*), a log, status and the dead letters as it is.
//
// A 2xx answer's body keeps its shape, so that the job decodes the model's
// output from it exactly as from a synchronous answer: only the key itself
// is removed (Exact), as the synchronous path leaves Content alone. Any
// other body loses the key and every key-shaped token but stays parseable
// for the classifier (Secrets); headers, codes, statuses and ids are
// fields (control characters escaped, bounded); messages are excerpts.

// safeRes passes a provider.Result through the boundary.
func (c *Client) safeRes(res provider.Result) provider.Result {
	b := c.redact
	o := &res.Observation
	if o.Status >= 200 && o.Status < 300 {
		o.Body = b.Exact(o.Body)
	} else {
		o.Body = b.Secrets(o.Body)
	}
	o.Headers = b.Headers(o.Headers)
	res.Content = b.Exact(res.Content)
	res.Malformed = b.Field(res.Malformed)
	res.NetworkError = b.Field(res.NetworkError)
	return res
}

func (c *Client) safeBatch(bt Batch) Batch {
	b := c.redact
	bt.ID, bt.VendorStatus, bt.Tag = b.Field(bt.ID), b.Field(bt.VendorStatus), b.Field(bt.Tag)
	bt.InputFileID, bt.OutputFileID, bt.ErrorFileID = b.Field(bt.InputFileID), b.Field(bt.OutputFileID), b.Field(bt.ErrorFileID)
	// A download address: only the key itself (a cut or escape would
	// break it).
	bt.ResultsURL = b.Exact(bt.ResultsURL)
	if bt.Validation != nil {
		v := make([]ValidationError, len(bt.Validation))
		for i, e := range bt.Validation {
			v[i] = ValidationError{Code: b.Field(e.Code), Line: e.Line, Message: b.Excerpt(e.Message), Param: b.Field(e.Param)}
		}
		bt.Validation = v
	}
	return bt
}

func (c *Client) safeResult(r Result) Result {
	r.CustomID, r.NotRun = c.redact.Field(r.CustomID), c.redact.Field(r.NotRun)
	r.Res = c.safeRes(r.Res)
	return r
}

// safeErr passes an error's answer and text through the boundary; errors.Is
// and errors.As still see what it wraps.
func (c *Client) safeErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return &CallError{Op: ce.Op, Res: c.safeRes(ce.Res)}
	}
	return &safeError{msg: c.redact.Excerpt(err.Error()), err: err}
}

type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// Upload: see upload.
func (c *Client) Upload(ctx context.Context, lines []Line, tag string) (string, error) {
	id, err := c.upload(ctx, lines, tag)
	return c.redact.Field(id), c.safeErr(err)
}

// Create: see create.
func (c *Client) Create(ctx context.Context, fileID string, lines []Line, tag string) (Batch, error) {
	b, err := c.create(ctx, fileID, lines, tag)
	return c.safeBatch(b), c.safeErr(err)
}

// Get: see get.
func (c *Client) Get(ctx context.Context, id string) (Batch, error) {
	b, err := c.get(ctx, id)
	return c.safeBatch(b), c.safeErr(err)
}

// Cancel: see cancel.
func (c *Client) Cancel(ctx context.Context, id string) (Batch, error) {
	b, err := c.cancel(ctx, id)
	return c.safeBatch(b), c.safeErr(err)
}

// Find: see find.
func (c *Client) Find(ctx context.Context, tag string, since time.Time, customIDs []string, known Known) (Batch, bool, error) {
	b, ok, err := c.find(ctx, tag, since, customIDs, known)
	return c.safeBatch(b), ok, c.safeErr(err)
}

// Results: see results.
func (c *Client) Results(ctx context.Context, b Batch) iter.Seq2[Result, error] {
	return func(yield func(Result, error) bool) {
		for r, err := range c.results(ctx, b) {
			if !yield(c.safeResult(r), c.safeErr(err)) {
				return
			}
		}
	}
}
