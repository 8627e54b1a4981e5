package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/triage-dev/triage/classify"
)

// maxSuccessBytes bounds how much of a 2xx body is read for decoding. Bodies
// kept in the Observation are cut at MaxBodyBytes regardless.
const maxSuccessBytes = 32 << 20

func formatFor(vendor string) (Format, error) {
	switch vendor {
	case "anthropic":
		return FormatAnthropic, nil
	case "openai", "azure-openai", "openrouter", "groq", "vllm", "ollama", "together",
		"fireworks", "xai", "deepseek", "mistral", "litellm-proxy", "cloudflare-ai-gateway", "other":
		return FormatOpenAI, nil
	case "gemini", "vertex", "bedrock", "cohere":
		return "", fmt.Errorf("%w: %q speaks its own API; use it through an OpenAI-compatible gateway or router", ErrUnsupportedVendor, vendor)
	default:
		return "", fmt.Errorf("%w: %q is not a vendor name", ErrUnsupportedVendor, vendor)
	}
}

// New returns a Client for one key. It checks the options and builds a pooled
// Transport unless o.HTTPClient is set. Errors never contain the API key.
func New(o Options) (*Client, error) {
	f, err := formatFor(o.Vendor)
	if err != nil {
		return nil, err
	}
	switch o.Format {
	case "", f:
	case FormatResponses:
		if o.Vendor != "openai" {
			return nil, fmt.Errorf("%w: the Responses format is OpenAI's; vendor %q speaks %s", ErrInvalidOptions, o.Vendor, f)
		}
		f = FormatResponses
	default:
		return nil, fmt.Errorf("%w: vendor %q speaks %s, not %q", ErrInvalidOptions, o.Vendor, f, o.Format)
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL must be an http or https URL with a host", ErrInvalidOptions)
	}
	if o.APIKey == "" {
		return nil, fmt.Errorf("%w: API key is empty", ErrInvalidOptions)
	}
	if strings.ContainsFunc(o.APIKey, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: API key contains control characters (a trailing newline?)", ErrInvalidOptions)
	}
	if o.Timeout < 0 || o.Concurrency < 0 {
		return nil, fmt.Errorf("%w: timeout and concurrency must not be negative", ErrInvalidOptions)
	}
	if o.Path == "" {
		o.Path = classify.PathDirect
	}
	if o.Timeout == 0 {
		o.Timeout = TimeoutDefault
	}
	if o.Concurrency == 0 {
		o.Concurrency = ConcurrencyDefault
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{
			Transport: newTransport(o.Concurrency),
			// A redirect is the observation: following a POST's 301/302/303
			// would resend it as a GET elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Client{
		format:   f,
		vendor:   o.Vendor,
		path:     o.Path,
		baseURL:  u,
		endpoint: endpointFor(f, u),
		apiKey:   o.APIKey,
		timeout:  o.Timeout,
		hc:       hc,
	}, nil
}

// newTransport pools enough idle connections for every worker slot, keeping
// the rest of http.DefaultTransport's settings (proxy from the environment,
// dial and TLS handshake timeouts).
func newTransport(concurrency int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2 * concurrency
	t.MaxIdleConns = max(100, 2*concurrency)
	t.IdleConnTimeout = 90 * time.Second
	return t
}

// Format returns the client's wire format.
func (c *Client) Format() Format { return c.format }

// Do sends one request and describes the outcome. The error is non-nil only
// when the Request is invalid (ErrInvalidRequest); every network outcome,
// timeouts and error statuses included, is in Result.Observation. Do never
// retries, and neither does the Transport underneath (the request is made
// non-replayable so net/http cannot resend it on a broken keep-alive
// connection).
func (c *Client) Do(ctx context.Context, r Request) (res Result, err error) {
	if err := r.validate(); err != nil {
		return Result{}, err
	}
	body, url := encodeBody(c.format, r), c.endpoint
	res = Result{Observation: classify.Observation{Vendor: c.vendor, Path: c.path}}

	// A streamed call with a ceiling: the whole call is bounded by the
	// ceiling, and the client's timeout only until the stream starts.
	limit, startBy := c.timeout, (*time.Timer)(nil)
	if r.Stream && r.StreamMax > c.timeout {
		limit = r.StreamMax
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var startTimedOut atomic.Bool
	if limit > c.timeout {
		startBy = time.AfterFunc(c.timeout, func() { startTimedOut.Store(true); cancel() })
		defer startBy.Stop()
	}

	var tr SendTrace
	ctx = httptrace.WithClientTrace(ctx, tr.ClientTrace())
	req, reqErr := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if reqErr != nil {
		return Result{}, fmt.Errorf("%w: cannot build the HTTP request", ErrInvalidRequest)
	}
	// With GetBody unset the request is not replayable: net/http will not
	// resend it by itself, whatever the Idempotency-Key header says.
	req.GetBody = nil
	c.setHeaders(req.Header, r)

	start := time.Now()
	defer func() { res.Elapsed = time.Since(start) }()

	resp, doErr := c.hc.Do(req)
	if doErr != nil {
		if startTimedOut.Load() {
			// Cancelled by the start timer, which is the key's timeout.
			doErr = context.DeadlineExceeded
		}
		res.NetworkError = NetworkError(doErr, c.baseURL.Host)
		if tr.MaybeWritten() {
			res.Observation.Phase = classify.PhaseSentNoResponse
		} else {
			res.Observation.Phase = classify.PhaseNotSent
		}
		return res, nil
	}
	defer resp.Body.Close()

	res.Observation.Phase = classify.PhaseResponse
	res.Observation.Status = resp.StatusCode
	res.Observation.Headers = LowerHeaders(resp.Header)
	res.RateLimit = ParseRateLimit(c.vendor, res.Observation.Headers, time.Now())

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The status is the outcome; a body cut short is still evidence.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
		res.Observation.Body = string(b)
		return res, nil
	}
	if r.Stream && isEventStream(resp.Header) {
		// The stream has started: from here its silence (IdleTimeout) and
		// the ceiling decide, not the client's timeout. Stop reports false
		// when the timeout already fired: the read then fails as cut.
		if startBy != nil {
			startBy.Stop()
		}
		body := io.Reader(resp.Body)
		if r.IdleTimeout > 0 {
			idle := newIdleReader(resp.Body, r.IdleTimeout, cancel)
			defer idle.stop()
			body = idle
			defer func() { res.IdleTimedOut = idle.fired() }()
		}
		c.readStream(body, &res)
		return res, nil
	}
	b, readErr := readAll(io.LimitReader(resp.Body, maxSuccessBytes+1), resp.ContentLength)
	if readErr != nil {
		// Written and answered 2xx, but the answer never arrived whole: the
		// call ran and may be billed.
		res.Observation.Body = capBody(b)
		res.Observation.Phase = classify.PhaseSentNoResponse
		return res, nil
	}
	decodeAnswer(c.format, b, &res)
	return res, nil
}

// schemaNameRE is the schema name both vendors accept (OpenAI's
// json_schema.name, Anthropic's tool name).
var schemaNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (r Request) validate() error {
	var missing []string
	if r.Model == "" {
		missing = append(missing, "Model")
	}
	if r.Prompt == "" {
		missing = append(missing, "Prompt")
	}
	if r.IdempotencyKey == "" {
		missing = append(missing, "IdempotencyKey")
	}
	if r.RecordID == "" {
		missing = append(missing, "RecordID")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s required", ErrInvalidRequest, strings.Join(missing, ", "))
	}
	if r.MaxTokens <= 0 {
		return fmt.Errorf("%w: MaxTokens must be positive, got %d", ErrInvalidRequest, r.MaxTokens)
	}
	if t := r.Temperature; t != nil && (math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0) {
		return fmt.Errorf("%w: Temperature must be a non-negative number", ErrInvalidRequest)
	}
	if r.Schema != nil {
		if !r.JSON {
			return fmt.Errorf("%w: Schema needs JSON", ErrInvalidRequest)
		}
		if !schemaNameRE.MatchString(r.SchemaName) {
			return fmt.Errorf("%w: SchemaName must be 1 to 64 letters, digits, '_' or '-', got %q", ErrInvalidRequest, r.SchemaName)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(r.Schema, &obj) != nil {
			return fmt.Errorf("%w: Schema must be a JSON object", ErrInvalidRequest)
		}
	}
	for _, f := range [...]struct{ name, v string }{{"IdempotencyKey", r.IdempotencyKey}, {"RecordID", r.RecordID}} {
		if strings.ContainsFunc(f.v, isControl) {
			return fmt.Errorf("%w: %s contains control characters", ErrInvalidRequest, f.name)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func (c *Client) setHeaders(h http.Header, r Request) {
	h.Set("Content-Type", "application/json")
	h.Set(HeaderIdempotencyKey, r.IdempotencyKey)
	h.Set(HeaderRecord, r.RecordID)
	if r.Stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	switch c.format {
	case FormatAnthropic:
		h.Set("x-api-key", c.apiKey)
		h.Set("anthropic-version", AnthropicVersion)
	default:
		h.Set("Authorization", "Bearer "+c.apiKey)
		if c.vendor == "azure-openai" {
			// Azure's key header; its v1 API also reads the bearer token.
			h.Set("api-key", c.apiKey)
		}
	}
}

// readAll is io.ReadAll starting from a buffer of the announced length
// (plus the byte that lets the end be seen without growing it), so a 2xx
// answer is read into one allocation instead of a doubling series from
// 512 bytes. The length is only a hint: a body longer or shorter than it
// is read as io.ReadAll would read it.
func readAll(r io.Reader, contentLength int64) ([]byte, error) {
	size := 512
	if contentLength > 0 && contentLength < maxSuccessBytes {
		size = int(contentLength) + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			// Add more capacity (let append pick how much).
			b = append(b, 0)[:len(b)]
		}
	}
}

func capBody(b []byte) string {
	if len(b) > MaxBodyBytes {
		b = b[:MaxBodyBytes]
	}
	return string(b)
}

func isEventStream(h http.Header) bool {
	return strings.HasPrefix(strings.ToLower(h.Get("Content-Type")), "text/event-stream")
}
