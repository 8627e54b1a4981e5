package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/triage-dev/triage/classify"
)

// ErrNoBackground: the client's wire format has no background responses.
var ErrNoBackground = fmt.Errorf("%w: background responses are the Responses format's", ErrInvalidRequest)

// Pending says a Responses-API result is a response still running
// (queued or in progress) in background mode: poll it (Client.Poll).
func (r Result) Pending() bool {
	return r.ResponseID != "" && (r.ResponseStatus == "queued" || r.ResponseStatus == "in_progress")
}

// Poll asks for a background response by id (GET {base}/responses/{id})
// and describes the answer as Do does a synchronous one: the response
// object, still pending or at its end (completed, failed, incomplete,
// cancelled), decoded, with the body for the classifier. A poll is not a
// model call: it is never billed, so a lost poll is PhaseNotSent (asking
// again costs nothing) whatever happened on the wire.
func (c *Client) Poll(ctx context.Context, responseID string) (Result, error) {
	return c.byID(ctx, http.MethodGet, responseID, "")
}

// Cancel asks the provider to stop a background response
// (POST {base}/responses/{id}/cancel): one still queued or in progress ends
// "cancelled"; a finished one is returned as it is.
func (c *Client) Cancel(ctx context.Context, responseID string) (Result, error) {
	return c.byID(ctx, http.MethodPost, responseID, "/cancel")
}

func (c *Client) byID(ctx context.Context, method, id, suffix string) (res Result, err error) {
	if c.format != FormatResponses {
		return Result{}, ErrNoBackground
	}
	if id == "" {
		return Result{}, fmt.Errorf("%w: response id required", ErrInvalidRequest)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := c.baseURL.JoinPath("responses", id).String() + suffix
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return Result{}, fmt.Errorf("%w: cannot build the request", ErrInvalidRequest)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	res = Result{Observation: classify.Observation{Vendor: c.vendor, Path: c.path}}
	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()
	resp, err := c.hc.Do(req)
	if err != nil {
		res.NetworkError = NetworkError(err, c.baseURL.Host)
		res.Observation.Phase = classify.PhaseNotSent
		return res, nil
	}
	defer resp.Body.Close()
	res.Observation.Phase = classify.PhaseResponse
	res.Observation.Status = resp.StatusCode
	res.Observation.Headers = LowerHeaders(resp.Header)
	b, readErr := io.ReadAll(io.LimitReader(resp.Body, maxSuccessBytes+1))
	if readErr != nil {
		res.Observation.Body = capBody(b)
		res.Observation.Phase = classify.PhaseNotSent
		res.NetworkError = NetworkError(readErr, c.baseURL.Host)
		return res, nil
	}
	decodeAnswer(c.format, b, &res)
	return res, nil
}
