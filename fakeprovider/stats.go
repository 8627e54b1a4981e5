package fakeprovider

import (
	"maps"
	"slices"
)

// Stats is what the fake has seen since it was created or last reset. It is also
// the JSON served on GET /__stats.
type Stats struct {
	// Requests counts every API request, rejected ones included.
	Requests int `json:"requests"`
	// ByStatus counts requests by the status sent; 0 is "no status line": a hang.
	ByStatus map[int]int `json:"by_status"`
	// ByAction counts requests by what the fake did (replays are "ok").
	ByAction map[Action]int `json:"by_action"`
	// ByRecord is keyed by record id (X-Triage-Record, else the messages' hash).
	ByRecord map[string]RecordStats `json:"by_record"`
	// BilledCalls counts calls that ran and cost money, whether or not the
	// answer reached the client (hangs, cut streams and garbage are billed).
	BilledCalls  int     `json:"billed_calls"`
	BilledUSD    float64 `json:"billed_usd"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	// BilledAfterClientLeft counts calls billed when their generation
	// ended after the client had given up (Scenario.GenerationTime).
	BilledAfterClientLeft int `json:"billed_after_client_left"`
	// DoubleBilledRecords counts records billed more than once.
	DoubleBilledRecords int `json:"double_billed_records"`
	// IdempotentReplays counts requests answered from the idempotency store.
	IdempotentReplays int `json:"idempotent_replays"`
	// StoreLookups counts GET /v1/chat/completions look-ups of stored
	// completions (stored.go); they are not API calls and cost nothing.
	StoreLookups int `json:"store_lookups"`
	// ResponsesAPI counts the Responses-API calls: POST /v1/responses and
	// the lines of batches whose endpoint is /v1/responses (they are in
	// Requests too).
	ResponsesAPI int `json:"responses_api"`
	// BackgroundCreated, BackgroundPolls and BackgroundCancels count the
	// Responses API's background responses created, GET /v1/responses/{id}
	// polls and POST /v1/responses/{id}/cancel calls (background.go).
	// Polls and cancels are not API calls and cost nothing.
	BackgroundCreated int `json:"background_created"`
	BackgroundPolls   int `json:"background_polls"`
	BackgroundCancels int `json:"background_cancels"`
	// RequestsWhileExhausted counts authenticated requests that arrived while
	// the prepaid balance was spent: how quickly a fleet stops calling.
	RequestsWhileExhausted int `json:"requests_while_exhausted"`
	InFlight               int `json:"in_flight"`
	PeakInFlight           int `json:"peak_in_flight"`
	// Hanging counts requests blocked in a hang right now.
	Hanging int `json:"hanging"`
	// BalanceUSD is nil when the balance is unlimited.
	BalanceUSD *float64 `json:"balance_usd"`
	// Batches counts the Batch APIs (batch.go).
	Batches BatchStats `json:"batches"`
}

// RecordStats is one record's history, in arrival order.
type RecordStats struct {
	Requests int `json:"requests"`
	Billed   int `json:"billed"`
	// Answers counts the billed calls and batch lines that produced the
	// model's whole answer (action ok, refusals and transport faults not
	// counted), whether or not the client read it: a whole answer paid for
	// more than once is paid twice.
	Answers int `json:"answers"`
	Replays int `json:"replays"`
	// Statuses and Actions have one entry per request.
	Statuses []int    `json:"statuses"`
	Actions  []Action `json:"actions"`
	// IdempotencyKeys has one entry per request, "" when none was sent, so a
	// test can check that a retry reused its key.
	IdempotencyKeys []string `json:"idempotency_keys"`
}

func newStats() Stats {
	return Stats{ByStatus: map[int]int{}, ByAction: map[Action]int{}, ByRecord: map[string]RecordStats{}}
}

func (st Stats) clone() Stats {
	c := st
	c.ByStatus = maps.Clone(st.ByStatus)
	c.ByAction = maps.Clone(st.ByAction)
	c.ByRecord = make(map[string]RecordStats, len(st.ByRecord))
	for k, r := range st.ByRecord {
		r.Statuses = slices.Clone(r.Statuses)
		r.Actions = slices.Clone(r.Actions)
		r.IdempotencyKeys = slices.Clone(r.IdempotencyKeys)
		c.ByRecord[k] = r
	}
	if st.BalanceUSD != nil {
		b := *st.BalanceUSD
		c.BalanceUSD = &b
	}
	return c
}
