package batchapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger/redact"
	"github.com/triage-dev/triage/worker/provider"
)

// Official limits (docs/batch-api.md gives the sources) and the share of the
// byte limit Limits hands out: request framing, multipart headers and the
// vendor's own way of counting bytes must fit in the rest.
const (
	OpenAIMaxLines     = 50000
	OpenAIMaxBytes     = 200 << 20
	AnthropicMaxLines  = 100000
	AnthropicMaxBytes  = 256 << 20
	BytesPercent       = 90
	MaxCustomIDLen     = 64
	MaxTagLen          = 512 // OpenAI metadata values
	MetadataKey        = "triage_provider_batch"
	openAIEndpoint     = "/v1/chat/completions"
	responsesEndpoint  = "/v1/responses"
	completionWindow   = "24h"
	findSkew           = 10 * time.Minute
	listPageSize       = 100
	maxAnswerBytes     = 32 << 20 // a batch object or a page of them
	maxResultLineBytes = 64 << 20
)

var (
	// ErrUnsupportedVendor wraps provider.ErrUnsupportedVendor: the vendor
	// has no Batch API this package speaks (only openai and anthropic do).
	ErrUnsupportedVendor = fmt.Errorf("%w: no Batch API client for it", provider.ErrUnsupportedVendor)
	// ErrInvalidLines: the lines given to Upload or Create cannot make a batch
	// (empty, a bad or duplicate custom_id, a body that is not a JSON object,
	// over Limits). No call was made.
	ErrInvalidLines = errors.New("batchapi: invalid batch lines")
	// ErrUnconfirmed is returned by Find (Anthropic) when a batch that may be
	// the one sought has not ended yet, so its custom_ids cannot be read: do
	// not resubmit, ask again once it has ended. The Batch returned with it is
	// that candidate.
	ErrUnconfirmed = errors.New("batchapi: a candidate batch has not ended; its lines cannot be checked yet")
	// ErrMalformedResult is yielded by Results for a result line that cannot
	// be read; the iteration goes on with the next line, and the line's job
	// is, like a missing one, to be treated as not run.
	ErrMalformedResult = errors.New("batchapi: malformed result line")
)

// Line is one request of a provider batch.
type Line struct {
	// CustomID is the job's idempotency key (provider.IdempotencyKey, 47
	// characters of [a-z0-9-]); 1 to 64 characters, unique in the batch.
	CustomID string
	// Body is the vendor request body exactly as the synchronous call sends
	// it (provider.RequestBody with Stream false): OpenAI's "body", Anthropic's
	// "params".
	Body json.RawMessage
}

// Options configure a Client; the fields mean what they mean in
// provider.Options.
type Options struct {
	// Vendor is "openai" or "anthropic". Required.
	Vendor string
	// Format is provider.FormatResponses for an OpenAI key speaking the
	// Responses API: its lines go to "/v1/responses" and their answers are
	// response objects. Default "": the vendor's.
	Format provider.Format
	// Path is copied to every Observation. Default classify.PathDirect.
	Path classify.Path
	// BaseURL is the API root, e.g. "https://api.openai.com/v1" or
	// "https://api.anthropic.com/v1". Required.
	BaseURL string
	// APIKey is sent as Bearer token or x-api-key. Required; never put in an
	// error.
	APIKey string
	// Timeout bounds every silence of a call: the wait for the answer once
	// the request is written, and any stall while a request or an answer is
	// moving. A bound on the whole call would have to fit a 200 MB upload or
	// result file on the slowest link. Default provider.TimeoutDefault (60s).
	Timeout time.Duration
	// HTTPClient replaces the default client. Its Timeout should be zero.
	HTTPClient *http.Client
}

// Limits are how big one batch may be: the vendor's limits, less a margin on
// bytes (BytesPercent of the vendor's).
type Limits struct {
	MaxLines int
	// MaxBytes bounds the sum of LineBytes of a batch's lines.
	MaxBytes int64
}

// Counts are a batch's request counts in one vocabulary for both vendors.
// Anthropic reports only Processing until the batch has ended. OpenAI counts
// expired and cancelled lines in neither completed nor failed; once such a
// batch has ended, its remaining lines are reported as Expired or Canceled.
type Counts struct {
	Total, Processing, Succeeded, Errored, Canceled, Expired int
}

// Vendor is c as the vendor's request_counts object names it, for people
// and programs that read the vendor's own words (`triage status`'s
// "counts"): OpenAI total/completed/failed, Anthropic processing/succeeded/
// errored/canceled/expired. What triage derived beyond them (OpenAI's lines
// counted in neither) is left out, as the vendor leaves it out.
func (c Counts) Vendor(vendor string) map[string]int {
	if vendor == "anthropic" {
		return map[string]int{"processing": c.Processing, "succeeded": c.Succeeded, "errored": c.Errored,
			"canceled": c.Canceled, "expired": c.Expired}
	}
	return map[string]int{"total": c.Total, "completed": c.Succeeded, "failed": c.Errored}
}

// ValidationError is one entry of an OpenAI batch's errors.data.
type ValidationError struct {
	Code string
	// Line is the 1-based input line; 0 when the error is about the file.
	Line    int
	Message string
	Param   string
}

// Batch is a provider batch as its vendor last reported it.
type Batch struct {
	// ID is the vendor's id (batch_…, msgbatch_…).
	ID string
	// VendorStatus in the vendor's words: OpenAI validating, in_progress,
	// finalizing, completed, expired, cancelling, cancelled, failed;
	// Anthropic in_progress, canceling, ended.
	VendorStatus string
	// Ended: terminal; results, if any, can be read now.
	Ended bool
	// Failed: OpenAI refused the whole input file (Validation says why).
	Failed     bool
	Validation []ValidationError
	Counts     Counts
	// InputFileID, OutputFileID and ErrorFileID are OpenAI's files.
	InputFileID, OutputFileID, ErrorFileID string
	// ResultsURL is Anthropic's results_url, set once the batch has ended.
	ResultsURL string
	// Tag is OpenAI's metadata.triage_provider_batch.
	Tag                           string
	CreatedAt, ExpiresAt, EndedAt time.Time
}

// Result is one line of an ended batch.
type Result struct {
	CustomID string
	// Ran: the request ran (and may be billed); Res is its outcome. False:
	// it never ran and was not billed (expired, canceled).
	Ran bool
	// NotRun says why, when !Ran: "expired", "canceled" or the vendor's code.
	NotRun string
	// Res, when Ran, is exactly what provider.Client.Do returns for the same
	// HTTP answer: classify Res.Observation as any call.
	Res provider.Result
}

// Not-run reasons.
const (
	NotRunExpired  = "expired"
	NotRunCanceled = "canceled"
)

// CallError is every failed HTTP call of the Client. Res describes the call
// as provider.Client.Do would: classify Res.Observation to react to it. A 2xx
// whose body is not the expected answer has Res.Malformed set.
type CallError struct {
	// Op is the Client method: upload, create, get, cancel, find, results.
	Op  string
	Res provider.Result
}

// Error gives the status and the vendor code, or the phase and the network
// error; never the body or the API key.
func (e *CallError) Error() string {
	o := e.Res.Observation
	var b strings.Builder
	b.WriteString("batchapi: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	switch {
	case o.Phase == classify.PhaseResponse && e.Res.Malformed != "":
		fmt.Fprintf(&b, "status %d: %s", o.Status, e.Res.Malformed)
	case o.Phase == classify.PhaseResponse:
		fmt.Fprintf(&b, "status %d", o.Status)
		if v := classify.Classify(o); v.Code != nil && *v.Code != "" {
			b.WriteString(" (")
			b.WriteString(*v.Code)
			b.WriteString(")")
		}
	default:
		b.WriteString(string(o.Phase))
		if o.Status != 0 {
			fmt.Fprintf(&b, " after status %d", o.Status)
		}
		if e.Res.NetworkError != "" {
			b.WriteString(": ")
			b.WriteString(e.Res.NetworkError)
		}
	}
	return b.String()
}

// Client speaks one key's Batch API. Safe for concurrent use.
type Client struct {
	format  provider.Format
	vendor  string
	path    classify.Path
	base    *url.URL
	apiKey  string
	timeout time.Duration
	hc      *http.Client
	redact  redact.Boundary // the key's: see edge.go
}

// New checks the options as provider.New does. Errors never contain the key.
func New(o Options) (*Client, error) {
	var f provider.Format
	switch o.Vendor {
	case "openai":
		f = provider.FormatOpenAI
	case "anthropic":
		f = provider.FormatAnthropic
	default:
		return nil, fmt.Errorf("%w: vendor %q (batch mode needs openai or anthropic)", ErrUnsupportedVendor, o.Vendor)
	}
	switch {
	case o.Format == "" || o.Format == f:
	case o.Format == provider.FormatResponses && f == provider.FormatOpenAI:
		f = provider.FormatResponses
	default:
		return nil, fmt.Errorf("%w: vendor %q has no batch format %q", provider.ErrInvalidOptions, o.Vendor, o.Format)
	}
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL must be an http or https URL with a host", provider.ErrInvalidOptions)
	}
	if o.APIKey == "" {
		return nil, fmt.Errorf("%w: API key is empty", provider.ErrInvalidOptions)
	}
	if strings.ContainsFunc(o.APIKey, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: API key contains control characters (a trailing newline?)", provider.ErrInvalidOptions)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: timeout must not be negative", provider.ErrInvalidOptions)
	}
	if o.Path == "" {
		o.Path = classify.PathDirect
	}
	if o.Timeout == 0 {
		o.Timeout = provider.TimeoutDefault
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// As provider: a redirect is the observation, never a resent POST.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Client{format: f, vendor: o.Vendor, path: o.Path, base: u, apiKey: o.APIKey, timeout: o.Timeout, hc: hc,
		redact: redact.New(o.APIKey)}, nil
}

// String describes the client without its API key.
func (c *Client) String() string {
	u := *c.base
	u.User, u.RawQuery = nil, ""
	return "batchapi.Client(" + c.vendor + " " + u.String() + ")"
}

// openAIEndpoint is the endpoint of the client's OpenAI batches: chat
// completions, or the Responses API.
func (c *Client) openAIEndpoint() string {
	if c.format == provider.FormatResponses {
		return responsesEndpoint
	}
	return openAIEndpoint
}

// Format is the wire format of the lines' bodies.
func (c *Client) Format() provider.Format { return c.format }

// Limits are the vendor's limits with a margin on bytes.
func (c *Client) Limits() Limits {
	if c.format == provider.FormatAnthropic {
		return Limits{MaxLines: AnthropicMaxLines, MaxBytes: AnthropicMaxBytes * BytesPercent / 100}
	}
	return Limits{MaxLines: OpenAIMaxLines, MaxBytes: OpenAIMaxBytes * BytesPercent / 100}
}

// LineBytes is what l adds to the upload (OpenAI: its JSONL line) or to the
// create request (Anthropic: its entry of "requests"), separator included,
// so a caller can fill a batch up to Limits().MaxBytes. Bodies are counted
// compacted, as they are sent.
func (c *Client) LineBytes(l Line) (int64, error) {
	b, err := c.encodeLine(nil, l)
	if err != nil {
		return 0, err
	}
	return int64(len(b)) + 1, nil
}
