package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/triage-dev/triage/classify"
)

// MetadataIdempotencyKey is the metadata key a stored call carries its
// idempotency key under (Request.Store), and the one Lookup filters on.
const MetadataIdempotencyKey = "triage_idem"

// ErrNoLookup: the client's wire format has no look-up of stored calls.
var ErrNoLookup = errors.New("provider: the wire format has no look-up of stored calls")

// storedList is OpenAI's list of stored chat completions.
type storedList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// Lookup asks the provider's store for the chat completions created with
// Request.Store under idempotencyKey (OpenAI stored completions:
// GET {base}/chat/completions?metadata[triage_idem]=key). Found: how many
// there are (each was billed), and res holds the first one decoded as an
// answer (its choices and usage). Zero found is not proof the call did not
// run: the store lags behind the answer, so the caller asks again for a
// while. The error is non-nil when the store could not be asked (a network
// error, a non-2xx status, a body that is not a list); never the API key.
func (c *Client) Lookup(ctx context.Context, idempotencyKey string) (res Result, found int, err error) {
	if c.format != FormatOpenAI {
		return Result{}, 0, ErrNoLookup
	}
	u := *c.baseURL.JoinPath("chat/completions")
	u.RawQuery = url.Values{"metadata[" + MetadataIdempotencyKey + "]": {idempotencyKey}, "limit": {"100"}}.Encode()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Result{}, 0, fmt.Errorf("%w: cannot build the look-up request", ErrInvalidRequest)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	resp, err := c.hc.Do(req)
	if err != nil {
		return Result{}, 0, fmt.Errorf("provider: look-up: %s", NetworkError(err, c.baseURL.Host))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSuccessBytes+1))
	if err != nil {
		return Result{}, 0, fmt.Errorf("provider: look-up: reading the answer: %s", NetworkError(err, c.baseURL.Host))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Result{}, 0, fmt.Errorf("provider: look-up: status %d", resp.StatusCode)
	}
	var l storedList
	if err := json.Unmarshal(b, &l); err != nil || l.Object != "list" {
		return Result{}, 0, errors.New("provider: look-up: the answer is not a list")
	}
	if len(l.Data) == 0 {
		return Result{}, 0, nil
	}
	res = Result{Observation: classify.Observation{Vendor: c.vendor, Path: c.path, Phase: classify.PhaseResponse, Status: http.StatusOK,
		Headers: LowerHeaders(resp.Header)}}
	decodeAnswer(c.format, l.Data[0], &res)
	if res.Malformed != "" {
		return Result{}, 0, fmt.Errorf("provider: look-up: a stored completion is not a chat completion: %s", res.Malformed)
	}
	return res, len(l.Data), nil
}
