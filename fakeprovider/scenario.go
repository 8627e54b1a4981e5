package fakeprovider

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"
)

// Action is what the fake does with one API request. Each action is rendered in
// the wire format of the vendor the request was addressed to, so one script
// drives both the OpenAI and the Anthropic endpoint.
type Action string

const (
	// ActionOK answers normally and bills the call.
	ActionOK Action = "ok"
	// ActionRateLimit answers the vendor's short-window 429 with retry hints.
	ActionRateLimit Action = "rate_limit"
	// ActionTooLarge answers the 429 a vendor sends when one request is bigger
	// than the whole per-minute token budget: waiting cannot make it pass.
	ActionTooLarge Action = "too_large"
	// ActionExhausted answers the vendor's out-of-credit error (OpenAI 429
	// insufficient_quota, Anthropic 400 "credit balance is too low").
	ActionExhausted Action = "exhausted"
	// ActionOverloaded answers the vendor's overload error (OpenAI 503,
	// Anthropic 529 overloaded_error).
	ActionOverloaded Action = "overloaded"
	// ActionServerError answers the vendor's 500.
	ActionServerError Action = "server_error"
	// ActionUnauthorized answers the vendor's 401 for a wrong key.
	ActionUnauthorized Action = "unauthorized"
	// ActionContextLength answers the vendor's 400 for an input over the context window.
	ActionContextLength Action = "context_length"
	// ActionInvalidParam answers the vendor's 400 for an invalid parameter.
	ActionInvalidParam Action = "invalid_param"
	// ActionPolicy answers the vendor's policy block: OpenAI 400 invalid_prompt;
	// Anthropic 200 with stop_reason "refusal" (billed, as Anthropic bills refusals).
	ActionPolicy Action = "policy"
	// ActionHang reads the body, bills the call and never answers: the handler
	// blocks until the request context ends or the Server is closed.
	ActionHang Action = "hang"
	// ActionCutStream bills the call, sends a 200 and part of the answer, then
	// drops the connection.
	ActionCutStream Action = "cut_stream"
	// ActionStreamError bills the call, starts a 200 stream and then sends the
	// vendor's in-stream error event. On a non-streaming request it behaves like
	// ActionCutStream: there is no in-band way to fail a 200 JSON body.
	ActionStreamError Action = "stream_error"
	// ActionGarbage bills the call and answers 200 with a body that is not JSON,
	// as a misbehaving proxy in front of the vendor would.
	ActionGarbage Action = "garbage"
	// ActionStallStream bills the call, starts a 200 stream, sends `chunks`
	// content chunks and then stops sending without closing, until the client
	// gives up: a generation stalled upstream. On a non-streaming request it
	// behaves like ActionHang after the status line would have been sent: the
	// body is never finished.
	ActionStallStream Action = "stall_stream"
	// ActionOffSchema bills the call and answers 200 with a JSON object that
	// breaks the request's JSON Schema (schema.go: the schema's required
	// properties left out, "off_schema": true added); without a schema,
	// {"off_schema":true}. A model that ignores structured output.
	ActionOffSchema Action = "off_schema"
	// ActionIncomplete bills the call and answers 200 with the first half
	// of the answer, cut short for the reason in the step's code:
	// "max_output_tokens" (the default) or "content_filter". OpenAI chat
	// completions say finish_reason "length" or "content_filter", Anthropic
	// stop_reason "max_tokens" or "refusal", the OpenAI Responses API
	// status "incomplete" with incomplete_details.reason.
	ActionIncomplete Action = "incomplete"
)

// Actions lists every action, in documentation order.
func Actions() []Action {
	return []Action{ActionOK, ActionRateLimit, ActionTooLarge, ActionExhausted, ActionOverloaded,
		ActionServerError, ActionUnauthorized, ActionContextLength, ActionInvalidParam, ActionPolicy,
		ActionHang, ActionCutStream, ActionStreamError, ActionGarbage, ActionStallStream, ActionOffSchema, ActionIncomplete}
}

func (a Action) valid() bool {
	for _, x := range Actions() {
		if a == x {
			return true
		}
	}
	return false
}

// statusActions maps a bare status in a script to the action whose vendor body
// fits it; the status itself is kept as written.
var statusActions = map[int]Action{
	200: ActionOK,
	400: ActionInvalidParam,
	401: ActionUnauthorized,
	429: ActionRateLimit,
	500: ActionServerError,
	502: ActionOverloaded,
	503: ActionOverloaded,
	504: ActionOverloaded,
	529: ActionOverloaded,
}

// Step is one scripted answer. In JSON it is a bare status (429), a bare action
// name ("hang") or an object ({"action":"overloaded","status":503}).
type Step struct {
	// Action to take. Empty: derived from Status.
	Action Action `json:"action,omitempty"`
	// Status overrides the HTTP status the action would send (error actions only).
	// A bare status keeps its exact code with the vendor body that fits it.
	Status int `json:"status,omitempty"`
	// RetryAfter is the wait hint sent with rate_limit and overloaded.
	// Default RetryAfterDefault for rate_limit, none for overloaded.
	RetryAfter Duration `json:"retry_after,omitempty"`
	// Chunks is how many content chunks cut_stream and stream_error send before
	// failing. Default ChunksDefault.
	Chunks int `json:"chunks,omitempty"`
	// Body, when set, is sent as is (a JSON error body of the test's own,
	// one no vendor table knows) with Status, which is then required, and
	// the vendor's usual headers; a retry hint only when RetryAfter is set.
	// Action is ignored.
	Body json.RawMessage `json:"body,omitempty"`
	// Code is, for stream_error on the OpenAI Responses API, the error code
	// the failure carries (response.failed's response.error.code or the
	// error event's code; default "server_error"), and for incomplete the
	// reason (default "max_output_tokens").
	Code string `json:"code,omitempty"`
	// Event is, for stream_error on the OpenAI Responses API, which event
	// ends the stream: "response.failed" (the default) or "error".
	Event string `json:"event,omitempty"`
}

// RetryAfterDefault is the hint a scripted rate_limit step sends when it names none.
const RetryAfterDefault = Duration(time.Second)

// ChunksDefault is how many content chunks a cut stream carries when the step
// names no number.
const ChunksDefault = 2

func (s Step) action() Action {
	if s.Action != "" {
		return s.Action
	}
	return statusActions[s.Status]
}

func (s *Step) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var a string
		if err := json.Unmarshal(b, &a); err != nil {
			return err
		}
		*s = Step{Action: Action(a)}
		return nil
	case len(b) > 0 && b[0] == '{':
		type plain Step // drops the method set, so this does not recurse
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var p plain
		if err := dec.Decode(&p); err != nil {
			return err
		}
		*s = Step(p)
		return nil
	default:
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("step must be a status, an action name or an object: %s", b)
		}
		*s = Step{Status: n}
		return nil
	}
}

func (s Step) MarshalJSON() ([]byte, error) {
	switch {
	case s.RetryAfter == 0 && s.Chunks == 0 && s.Status == 0 && s.Body == nil && s.Code == "" && s.Event == "":
		return json.Marshal(string(s.Action))
	case s.RetryAfter == 0 && s.Chunks == 0 && s.Action == "" && s.Body == nil && s.Code == "" && s.Event == "":
		return json.Marshal(s.Status)
	}
	type plain Step
	return json.Marshal(plain(s))
}

func (s Step) validate(field string) error {
	if s.Body != nil {
		if s.Status < 400 || s.Status > 599 {
			return fmt.Errorf("%s: a body needs an error status (400-599), got %d", field, s.Status)
		}
		if !json.Valid(s.Body) {
			return fmt.Errorf("%s: body is not JSON", field)
		}
		return nil
	}
	if s.Action == "" && s.Status == 0 {
		return fmt.Errorf("%s: empty step", field)
	}
	if s.Action == "" {
		if _, ok := statusActions[s.Status]; !ok {
			return fmt.Errorf("%s: status %d has no default action; name one", field, s.Status)
		}
	} else if !s.Action.valid() {
		return fmt.Errorf("%s: unknown action %q", field, s.Action)
	}
	if s.Status != 0 && (s.Status < 100 || s.Status > 599) {
		return fmt.Errorf("%s: status %d out of range", field, s.Status)
	}
	if s.Chunks < 0 || s.RetryAfter < 0 {
		return fmt.Errorf("%s: chunks and retry_after must not be negative", field)
	}
	switch s.Event {
	case "", "response.failed", "error":
	default:
		return fmt.Errorf("%s: event %q is not one of: response.failed, error", field, s.Event)
	}
	if s.action() == ActionIncomplete && s.Code != "" && s.Code != "max_output_tokens" && s.Code != "content_filter" {
		return fmt.Errorf("%s: an incomplete step's code %q is not one of: max_output_tokens, content_filter", field, s.Code)
	}
	return nil
}

// Duration is a time.Duration that reads and writes JSON as "1.5s" (a bare
// number is taken as seconds), so scenario files stay readable.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like \"1.5s\" or a number of seconds: %s", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// Price is what one million tokens cost, in USD.
type Price struct {
	// InputUSDPerMTok default InputUSDPerMTokDefault.
	InputUSDPerMTok float64 `json:"input_usd_per_mtok,omitempty"`
	// OutputUSDPerMTok default OutputUSDPerMTokDefault.
	OutputUSDPerMTok float64 `json:"output_usd_per_mtok,omitempty"`
}

// Default prices are gpt-4o-mini's, the model the example configuration uses.
const (
	InputUSDPerMTokDefault  = 0.15
	OutputUSDPerMTokDefault = 0.60
)

// Balance is a prepaid account. When it reaches zero every call is answered with
// the vendor's exhausted error (or Answer) until TopUp.
type Balance struct {
	USD float64 `json:"usd"`
	// Answer, when set, answers every call while the balance is spent instead
	// of the vendor's exhausted error: an account error worded some other
	// way (a Step with a Body of its own). Default nil: ActionExhausted.
	Answer *Step `json:"answer,omitempty"`
}

// RateLimit is a token bucket per minute, refilled continuously, starting full.
// Zero fields are unlimited.
type RateLimit struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	// TokensPerMinute counts input tokens (Anthropic's ITPM). A single request
	// over it (or over BurstTokens) is answered too_large.
	TokensPerMinute int `json:"tokens_per_minute,omitempty"`
	// BurstRequests and BurstTokens are the buckets' sizes: how much may go
	// at once after a quiet spell. Default a full minute's worth, as the
	// vendors describe their buckets; real APIs also enforce shorter windows,
	// which a smaller burst models.
	BurstRequests int `json:"burst_requests,omitempty"`
	BurstTokens   int `json:"burst_tokens,omitempty"`
	// NoHeaders stops the rate-limit headers (x-ratelimit-*,
	// anthropic-ratelimit-*) that are otherwise sent on every reply, as many
	// OpenAI-compatible servers send none.
	NoHeaders bool `json:"no_headers,omitempty"`
}

// Outage is a window during which every call is answered with Action (default
// overloaded). A window is a range of requests, or a range of time measured on
// Scenario.Now from when the scenario was set or the Server reset; set one or both.
type Outage struct {
	// FromRequest is the 1-based number of the first request in the window;
	// Requests is how many. Counted over API requests that passed authentication.
	FromRequest int `json:"from_request,omitempty"`
	Requests    int `json:"requests,omitempty"`
	// After is when the window opens, For how long it stays open.
	After Duration `json:"after,omitempty"`
	For   Duration `json:"for,omitempty"`
	// Action default ActionOverloaded.
	Action Action `json:"action,omitempty"`
	// Status overrides the action's status, as in Step.
	Status int `json:"status,omitempty"`
	// Body answers with a body of the test's own, as in Step.Body: "after
	// N calls, answer every call with this body" is an Outage with
	// FromRequest N and a large Requests.
	Body json.RawMessage `json:"body,omitempty"`
}

func (o Outage) step() Step {
	a := o.Action
	if a == "" {
		a = ActionOverloaded
	}
	return Step{Action: a, Status: o.Status, Body: o.Body}
}

func (o Outage) matches(n int, since time.Duration) bool {
	byCount := o.Requests > 0
	byTime := o.For > 0
	if byCount && (n < o.FromRequest || n >= o.FromRequest+o.Requests) {
		return false
	}
	if byTime && (since < time.Duration(o.After) || since >= time.Duration(o.After+o.For)) {
		return false
	}
	return byCount || byTime
}

// Poison says which inputs are rejected whatever else the scenario says.
type Poison struct {
	// ContextTokens is the context window; an input estimated over it is answered
	// context_length. 0: no limit.
	ContextTokens int `json:"context_tokens,omitempty"`
	// InvalidMarker in any message or the system prompt: invalid_param. "": off.
	InvalidMarker string `json:"invalid_marker,omitempty"`
	// PolicyMarker in any message or the system prompt: policy. "": off.
	PolicyMarker string `json:"policy_marker,omitempty"`
}

// RandomFault is answered with probability P. The draw is a hash of the seed,
// the record and the record's attempt number, so a scenario replays the same
// faults for the same records whatever order concurrent requests arrive in.
type RandomFault struct {
	P      float64 `json:"p"`
	Action Action  `json:"action"`
	Status int     `json:"status,omitempty"`
	Chunks int     `json:"chunks,omitempty"`
}

// Scenario scripts the fake. The zero Scenario answers every well-formed
// request with success. Checks run in this order, the first match answering:
// authentication, idempotent replay, the record's script, the global script,
// outages, the balance, poison, the rate limit, random faults.
type Scenario struct {
	// Name is informational.
	Name string `json:"name,omitempty"`
	// Seed drives every random choice (faults, ids). Same seed, same replay.
	Seed int64 `json:"seed,omitempty"`
	// APIKey, when set, is the only key accepted; others get the vendor's 401.
	// A request with no key at all always gets the vendor's 401.
	APIKey string `json:"api_key,omitempty"`
	// Price of billed calls. Zero fields take the defaults.
	Price Price `json:"price,omitempty"`
	// Balance nil: unlimited.
	Balance *Balance `json:"balance,omitempty"`
	// RateLimit nil: none.
	RateLimit *RateLimit    `json:"rate_limit,omitempty"`
	Outages   []Outage      `json:"outages,omitempty"`
	Poison    Poison        `json:"poison,omitempty"`
	Random    []RandomFault `json:"random,omitempty"`
	// Script[i] answers the (i+1)-th API request that passed authentication.
	Script []Step `json:"script,omitempty"`
	// RecordScripts[id][i] answers the (i+1)-th request for record id (the
	// X-Triage-Record header, else the messages' hash) and wins over Script.
	RecordScripts map[string][]Step `json:"record_scripts,omitempty"`
	// Latency is waited before each answer (real time; keep 0 in tests).
	Latency Duration `json:"latency,omitempty"`
	// ChunkLatency is waited between stream chunks (real time; keep 0 in tests).
	ChunkLatency Duration `json:"chunk_latency,omitempty"`
	// Batch scripts the Batch APIs (batch.go).
	Batch BatchScenario `json:"batch,omitzero"`
	// NoReplay turns Idempotency-Key replay off: a repeated key runs (and
	// bills) the request again, as OpenAI, Anthropic and every provider
	// known do. Default false: a repeated key is answered with the first
	// call's answer and not billed again.
	NoReplay bool `json:"no_replay,omitempty"`
	// StoreLag is how long a stored completion (an OpenAI call with
	// store: true) takes to show in GET /v1/chat/completions?metadata[k]=v,
	// as the real store lags behind the answer. Default 0: at once.
	StoreLag Duration `json:"store_lag,omitempty"`
	// GenerationTime is how long the model generates each answer that runs
	// on it (ok, Anthropic refusals), in real time. The call is billed when
	// generation ends, whether or not the client is still waiting: a client
	// that gives up (times out, is stopped) has paid for the call anyway.
	// Default 0: answered and billed at once.
	GenerationTime Duration `json:"generation_time,omitempty"`

	// Now is the clock for time windows and the rate limit. Default time.Now.
	Now func() time.Time `json:"-"`
	// Logger default: discard.
	Logger *slog.Logger `json:"-"`
}

// WithDefaults returns a copy with zero fields filled in.
func (s Scenario) WithDefaults() Scenario {
	if s.Price.InputUSDPerMTok == 0 {
		s.Price.InputUSDPerMTok = InputUSDPerMTokDefault
	}
	if s.Price.OutputUSDPerMTok == 0 {
		s.Price.OutputUSDPerMTok = OutputUSDPerMTokDefault
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// Validate names the first bad field.
func (s Scenario) Validate() error {
	if s.Price.InputUSDPerMTok < 0 || s.Price.OutputUSDPerMTok < 0 {
		return errors.New("price: must not be negative")
	}
	if s.RateLimit != nil && (s.RateLimit.RequestsPerMinute < 0 || s.RateLimit.TokensPerMinute < 0 ||
		s.RateLimit.BurstRequests < 0 || s.RateLimit.BurstTokens < 0) {
		return errors.New("rate_limit: must not be negative")
	}
	for i, o := range s.Outages {
		f := fmt.Sprintf("outages[%d]", i)
		if o.Requests <= 0 && o.For <= 0 {
			return fmt.Errorf("%s: set requests (with from_request) or for (with after)", f)
		}
		if o.Requests > 0 && o.FromRequest < 1 {
			return fmt.Errorf("%s: from_request is 1-based", f)
		}
		if o.Requests < 0 || o.For < 0 || o.After < 0 {
			return fmt.Errorf("%s: must not be negative", f)
		}
		if err := o.step().validate(f); err != nil {
			return err
		}
	}
	if s.Balance != nil && s.Balance.Answer != nil {
		if err := s.Balance.Answer.validate("balance.answer"); err != nil {
			return err
		}
	}
	if s.Poison.ContextTokens < 0 {
		return errors.New("poison.context_tokens: must not be negative")
	}
	sum := 0.0
	for i, r := range s.Random {
		f := fmt.Sprintf("random[%d]", i)
		if r.P < 0 || r.P > 1 {
			return fmt.Errorf("%s.p: %v is not a probability", f, r.P)
		}
		sum += r.P
		if err := (Step{Action: r.Action, Status: r.Status, Chunks: r.Chunks}).validate(f); err != nil {
			return err
		}
	}
	if sum > 1+1e-9 {
		return fmt.Errorf("random: probabilities add up to %v, more than 1", sum)
	}
	for i, st := range s.Script {
		if err := st.validate(fmt.Sprintf("script[%d]", i)); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(s.RecordScripts))
	for id := range s.RecordScripts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for i, st := range s.RecordScripts[id] {
			if err := st.validate(fmt.Sprintf("record_scripts[%q][%d]", id, i)); err != nil {
				return err
			}
		}
	}
	if s.Latency < 0 || s.ChunkLatency < 0 {
		return errors.New("latency: must not be negative")
	}
	return s.Batch.validate()
}

// ParseScenario reads a scenario from JSON. Unknown fields are errors, so a typo
// in a scenario file does not silently turn a fault off.
func ParseScenario(r io.Reader) (Scenario, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return Scenario{}, fmt.Errorf("parse scenario: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Scenario{}, fmt.Errorf("scenario: %w", err)
	}
	return s, nil
}

//go:embed scenarios/*.json
var shipped embed.FS

// ScenarioNames lists the shipped scenarios LoadScenario knows.
func ScenarioNames() []string {
	entries, _ := shipped.ReadDir("scenarios")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	return names
}

// LoadScenario returns a shipped scenario by name (see ScenarioNames).
func LoadScenario(name string) (Scenario, error) {
	f, err := shipped.Open("scenarios/" + name + ".json")
	if err != nil {
		return Scenario{}, fmt.Errorf("no shipped scenario %q (have %s)", name, strings.Join(ScenarioNames(), ", "))
	}
	defer f.Close()
	return ParseScenario(f)
}

// LoadScenarioFile reads a scenario file; a name without a file behind it is
// looked up among the shipped scenarios, so `--scenario storm` works anywhere.
func LoadScenarioFile(path string) (Scenario, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(path, `/\.`) {
		return LoadScenario(path)
	}
	if err != nil {
		return Scenario{}, err
	}
	defer f.Close()
	return ParseScenario(f)
}
