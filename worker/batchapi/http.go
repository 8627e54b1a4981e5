package batchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/provider"
)

// endpoint is the base URL joined with path segments, the base's query kept
// and q added.
func (c *Client) endpoint(q url.Values, segs ...string) string {
	u := c.base.JoinPath(segs...)
	if len(q) > 0 {
		all := u.Query()
		for k, vs := range q {
			all[k] = vs
		}
		u.RawQuery = all.Encode()
	}
	return u.String()
}

// exchange is one HTTP call in progress.
type exchange struct {
	op    string
	res   provider.Result
	start time.Time
	quiet *silence
	host  string
}

// fail ends the call as a *CallError in phase; a call cut by the silence
// timer says so rather than "cancelled".
func (x *exchange) fail(phase classify.Phase) *CallError {
	x.res.Observation.Phase = phase
	x.res.Elapsed = time.Since(x.start)
	if phase != classify.PhaseResponse && x.quiet.fired.Load() {
		x.res.NetworkError = "no answer within the key's timeout (host " + x.host + ")"
	}
	return &CallError{Op: x.op, Res: x.res}
}

// silence cancels a call once no byte has moved for d: the wait for the
// answer, or a stall while a large file goes up or comes down. A bound on the
// whole call would have to fit the biggest file any link could carry.
type silence struct {
	timer  *time.Timer
	d      time.Duration
	fired  atomic.Bool
	cancel context.CancelFunc
}

func (s *silence) stop() {
	s.timer.Stop()
	s.cancel()
}

// moving re-arms the timer around each read.
type moving struct {
	r io.Reader
	s *silence
}

func (m *moving) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		m.s.timer.Reset(m.s.d)
	}
	return n, err
}

type movingBody struct {
	moving
	io.Closer
}

// send makes one call and returns its 2xx response, body unread; the caller
// reads it and then calls x.quiet.stop. Anything else is a *CallError. A POST
// is not replayable, so net/http never resends it by itself: a create sent
// twice is two batches. accept "" leaves the type to the server (downloads:
// JSONL, octet-stream).
func (c *Client) send(ctx context.Context, op, method, u, accept, contentType string, body []byte) (*http.Response, *exchange, error) {
	ctx, cancel := context.WithCancel(ctx)
	quiet := &silence{d: c.timeout, cancel: cancel}
	quiet.timer = time.AfterFunc(c.timeout, func() { quiet.fired.Store(true); cancel() })
	x := &exchange{op: op, res: provider.Result{Observation: classify.Observation{Vendor: c.vendor, Path: c.path}},
		start: time.Now(), quiet: quiet, host: c.base.Host}
	var tr provider.SendTrace
	ctx = httptrace.WithClientTrace(ctx, tr.ClientTrace())
	var rd io.Reader
	if body != nil {
		rd = &moving{r: bytes.NewReader(body), s: quiet}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		quiet.stop()
		x.res.NetworkError = "cannot build the HTTP request (host " + c.base.Host + ")"
		return nil, nil, x.fail(classify.PhaseNotSent)
	}
	// Not replayable (GetBody unset): net/http will not resend it itself.
	req.ContentLength = int64(len(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.format == provider.FormatAnthropic {
		req.Header.Set("x-api-key", c.apiKey)
		req.Header.Set("anthropic-version", provider.AnthropicVersion)
	} else {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		defer quiet.stop()
		x.res.NetworkError = provider.NetworkError(err, c.base.Host)
		if tr.MaybeWritten() {
			return nil, nil, x.fail(classify.PhaseSentNoResponse)
		}
		return nil, nil, x.fail(classify.PhaseNotSent)
	}
	resp.Body = &movingBody{moving{r: resp.Body, s: quiet}, resp.Body}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer quiet.stop()
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, provider.MaxBodyBytes))
		x.res = provider.DecodeResponse(c.format, c.vendor, c.path, resp.StatusCode, provider.LowerHeaders(resp.Header), b)
		x.res.Elapsed = time.Since(x.start)
		return nil, nil, &CallError{Op: op, Res: x.res}
	}
	x.res.Observation.Status = resp.StatusCode
	x.res.Observation.Headers = provider.LowerHeaders(resp.Header)
	return resp, x, nil
}

// callJSON makes one call and decodes its 2xx JSON answer into out; valid,
// when set, says whether out is the answer expected.
func (c *Client) callJSON(ctx context.Context, op, method, u, contentType string, body []byte, out any, valid func() bool) error {
	resp, x, err := c.send(ctx, op, method, u, "application/json", contentType, body)
	if err != nil {
		return err
	}
	defer x.quiet.stop()
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	x.res.Observation.Body = capBody(b)
	if err != nil {
		x.res.NetworkError = provider.NetworkError(err, c.base.Host)
		return x.fail(classify.PhaseSentNoResponse)
	}
	if len(b) > maxAnswerBytes || json.Unmarshal(b, out) != nil || (valid != nil && !valid()) {
		x.res.Malformed = "2xx body is not the " + op + " answer"
		return x.fail(classify.PhaseResponse)
	}
	return nil
}

func capBody(b []byte) string {
	if len(b) > provider.MaxBodyBytes {
		b = b[:provider.MaxBodyBytes]
	}
	return string(b)
}
