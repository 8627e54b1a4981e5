package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/riverqueue/river"
	"github.com/tidwall/gjson"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
)

// Rejection reasons (classify's request table) that a changed request can
// get past.
const (
	// ReasonContextLength: the input does not fit the model's context window.
	ReasonContextLength = "context_length"
	// ReasonJSONModeRefused: the endpoint refuses JSON mode (response_format).
	ReasonJSONModeRefused = "json_mode_refused"
	// ReasonChangeLost: this very request was rejected by an earlier run of
	// the job, which stopped before its changed retry was kept (a crash
	// between the outcome and the snooze).
	ReasonChangeLost = "change_lost"
)

// changeLost is the reaction to finding this job's unchanged request
// already rejected: a rejected call is dead-lettered in the transaction of
// its outcome, so only a run that decided a changed retry and died before
// its change landed in the job leaves one. Sending it again would resend a
// rejected request unchanged; the record goes to the dead letters instead,
// where requeue starts it afresh.
func changeLost() Reaction {
	return deadLetter(classify.Rejected, ReasonChangeLost,
		"an earlier run was rejected and stopped before its changed retry was kept; not resent unchanged (requeue to try again)")
}

// metaChange is the job metadata key that holds the job's one change, so
// that every later run renders the same changed request (and its own
// idempotency key) until the job ends.
const metaChange = "triage_change"

// change is how a request is altered for its one changed retry. The zero
// value is no change.
type change struct {
	// MaxFieldChars: every string in the record longer than this many
	// characters is cut to it (on_overflow = "truncate"); 0: none is.
	MaxFieldChars int `json:"max_field_chars,omitempty"`
	// DropJSON: send without JSON mode (response_format), which the
	// endpoint refused; the answer is still checked for a JSON object.
	DropJSON bool `json:"drop_json,omitempty"`
}

func (ch change) isZero() bool { return ch == change{} }

// label is how the ledger, export and dlq show name the change.
func (ch change) label() string {
	switch {
	case ch.MaxFieldChars > 0 && ch.DropJSON:
		return ledger.ChangeTruncated + "+" + ledger.ChangeDroppedJSON
	case ch.MaxFieldChars > 0:
		return ledger.ChangeTruncated
	case ch.DropJSON:
		return ledger.ChangeDroppedJSON
	}
	return ""
}

// jobChange reads the job's change from its metadata.
func jobChange(metadata []byte) change {
	var ch change
	if raw := gjson.GetBytes(metadata, metaChange); raw.IsObject() {
		_ = json.Unmarshal([]byte(raw.Raw), &ch)
	}
	return ch
}

// changeFacts is what a rejected call's changed retry is decided from.
type changeFacts struct {
	// Changed: this call already carried the job's change; a job is changed
	// at most once.
	Changed bool
	// Truncate: the pipeline's on_overflow is truncate.
	Truncate bool
	// Cut is the MaxFieldChars that makes the request fit (see fitCut); 0:
	// shortening the record's strings cannot make it fit.
	Cut int
	// JSON: the request asked for JSON mode.
	JSON bool
}

// changedRetry decides whether a rejection is answered with the job's one
// changed retry: a context overflow with truncation allowed and a cut that
// fits, or JSON mode refused on a request that used it.
func changedRetry(a after) (Reaction, bool) {
	f := a.Change
	if f.Changed {
		return Reaction{}, false
	}
	switch a.Verdict.Reason {
	case ReasonContextLength:
		if f.Truncate && f.Cut > 0 {
			return Reaction{Kind: ReactRetryChanged, Change: change{MaxFieldChars: f.Cut}}, true
		}
	case ReasonJSONModeRefused:
		if f.JSON {
			return Reaction{Kind: ReactRetryChanged, Change: change{DropJSON: true}}, true
		}
	}
	return Reaction{}, false
}

// rejectedDetail explains a rejected dead letter whose job had already been
// changed once, or that truncation would not fix.
func rejectedDetail(a after) string {
	f := a.Change
	switch {
	case f.Changed:
		return "rejected again after the one changed retry; the ledger shows both attempts (`triage ledger --batch`)"
	case a.Verdict.Reason == ReasonContextLength && f.Truncate:
		return "on_overflow = truncate, but shortening the record's strings cannot make the request fit"
	case a.Verdict.Reason == ReasonContextLength:
		return `the request does not fit the model's context; on_overflow = "truncate" would retry it once shortened`
	}
	return ""
}

// overflowSlack is the share of extra characters cut beyond the estimate, so
// that one truncated retry fits even where the vendor's tokens run shorter
// than our four-characters-a-token average.
const overflowSlack = 0.1

// fitCut is the MaxFieldChars that makes a request of promptChars
// characters (system and prompt), which the vendor counted as ov, fit the
// model's context less maxTokens. The vendor's counts are used when given;
// otherwise the size is our own estimate (four characters a token, as the
// cost estimate) and the limit the model's context_tokens. 0: the record's
// strings are too short to cut enough, or the limit is unknown.
func fitCut(record any, promptChars int, ov classify.Overflow, contextTokens, maxTokens int) int {
	limit := contextTokens
	if ov.Limit > 0 && (limit == 0 || ov.Limit < limit) {
		limit = ov.Limit
	}
	target := limit - maxTokens
	if target <= 0 || promptChars <= 0 {
		return 0
	}
	input := ov.Input
	if input <= 0 {
		input = promptChars / 4
	}
	// The vendor said it does not fit: never trust an estimate saying it does.
	input = max(input, target+1)
	perToken := float64(promptChars) / float64(input)
	excess := int(math.Ceil(float64(input-target)*perToken*(1+overflowSlack))) + 16
	return waterLevel(stringLengths(record, nil), excess)
}

// waterLevel is the largest cap L ≥ 1 such that cutting every length above
// L down to L removes at least excess characters; 0 if none does.
func waterLevel(lengths []int, excess int) int {
	slices.SortFunc(lengths, func(a, b int) int { return b - a })
	removed := 0
	for i, n := range lengths {
		next := 0
		if i+1 < len(lengths) {
			next = lengths[i+1]
		}
		// Lowering the i+1 longest from n to next removes (i+1)·(n-next).
		if removed+(i+1)*(n-next) >= excess {
			left := excess - removed
			l := n - (left+i)/(i+1) // ceil(left/(i+1))
			if l < 1 {
				return 0
			}
			return l
		}
		removed += (i + 1) * (n - next)
	}
	return 0
}

// stringLengths appends the length, in characters, of every string value in
// v (a decoded JSON value).
func stringLengths(v any, out []int) []int {
	switch t := v.(type) {
	case string:
		out = append(out, utf8.RuneCountInString(t))
	case map[string]any:
		for _, e := range t {
			out = stringLengths(e, out)
		}
	case []any:
		for _, e := range t {
			out = stringLengths(e, out)
		}
	}
	return out
}

// truncateStrings cuts every string value in v longer than n characters to
// its first n, in place where it can, and returns the result.
func truncateStrings(v any, n int) any {
	switch t := v.(type) {
	case string:
		if utf8.RuneCountInString(t) > n {
			r := []rune(t)
			return string(r[:n])
		}
		return t
	case map[string]any:
		for k, e := range t {
			t[k] = truncateStrings(e, n)
		}
	case []any:
		for i, e := range t {
			t[i] = truncateStrings(e, n)
		}
	}
	return v
}

// applyChange alters the record and the request flags for the job's change.
func applyChange(ch change, record map[string]any) {
	if ch.MaxFieldChars > 0 {
		truncateStrings(record, ch.MaxFieldChars)
	}
}

// overflowFacts fills a rejected call's changeFacts from the pipeline, the
// rendered request and the vendor's counts.
func (c *call) overflowFacts(ov classify.Observation) changeFacts {
	f := changeFacts{Changed: !c.change.isZero(), Truncate: c.pipeline.OnOverflow == config.OverflowTruncate, JSON: c.req.JSON}
	if f.Truncate && !f.Changed && c.verdict.Reason == ReasonContextLength {
		var record any
		if err := json.Unmarshal(c.job.Args.Record, &record); err == nil {
			counts, _ := classify.ContextOverflow(ov)
			f.Cut = fitCut(record, len(c.req.System)+len(c.req.Prompt), counts, c.model.ContextTokens, c.req.MaxTokens)
		}
	}
	return f
}

func (ch change) String() string {
	if ch.MaxFieldChars > 0 {
		return fmt.Sprintf("%s(max_field_chars %d)", ch.label(), ch.MaxFieldChars)
	}
	return ch.label()
}

// retryChanged carries out a RetryChanged: the rejected attempt's outcome,
// then the change kept in the job's metadata (it lands with the snooze), and
// the job back at once. The next run renders the changed request, whose hash
// and so idempotency key differ from the rejected one's.
func (r *Runtime) retryChanged(ctx context.Context, c *call, rx Reaction) error {
	if err := r.finish(ctx, c, rx.Outcome); err != nil {
		return fmt.Errorf("retry changed: %w", err)
	}
	if err := river.MetadataSet(ctx, metaChange, rx.Change); err != nil {
		return fmt.Errorf("retry changed: keep the change: %w", err)
	}
	r.log.InfoContext(ctx, "rejected: retrying once changed", "batch", c.job.Args.Batch, "record_id", c.job.Args.RecordID,
		"job_id", c.job.ID, "reason", c.verdict.Reason, "change", rx.Change.label(), "max_field_chars", rx.Change.MaxFieldChars)
	return park(ctx, c.job, 0)
}
