package decide

import (
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/triage-dev/triage/classify"
)

// Rejection reasons (classify's request table) that a changed request can
// get past, and the one the worker decides when a change was lost.
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

// ChangeLost is the reaction to finding this job's unchanged request
// already rejected: a rejected call is dead-lettered in the transaction of
// its outcome, so only a run that decided a changed retry and died before
// its change landed in the job leaves one. Sending it again would resend a
// rejected request unchanged; the record goes to the dead letters instead,
// where requeue starts it afresh.
func ChangeLost() Reaction {
	return DeadLetter(classify.Rejected, ReasonChangeLost,
		"an earlier run was rejected and stopped before its changed retry was kept; not resent unchanged (requeue to try again)")
}

// Change is how a request is altered for its one changed retry. The zero
// value is no change. The worker keeps it in the job's metadata (JSON), so
// that every later run renders the same changed request.
type Change struct {
	// MaxFieldChars: every string in the record longer than this many
	// characters is cut to it (on_overflow = "truncate"); 0: none is.
	MaxFieldChars int `json:"max_field_chars,omitempty"`
	// DropJSON: send without JSON mode (response_format), which the
	// endpoint refused; the answer is still checked for a JSON object.
	DropJSON bool `json:"drop_json,omitempty"`
}

// IsZero: no change.
func (ch Change) IsZero() bool { return ch == Change{} }

func (ch Change) String() string {
	switch {
	case ch.MaxFieldChars > 0 && ch.DropJSON:
		return fmt.Sprintf("max_field_chars %d, drop_json", ch.MaxFieldChars)
	case ch.MaxFieldChars > 0:
		return fmt.Sprintf("max_field_chars %d", ch.MaxFieldChars)
	case ch.DropJSON:
		return "drop_json"
	}
	return "none"
}

// Apply alters the record for the change (its request flags are the
// renderer's: DropJSON).
func (ch Change) Apply(record map[string]any) {
	if ch.MaxFieldChars > 0 {
		truncateStrings(record, ch.MaxFieldChars)
	}
}

// ChangeFacts is what a rejected call's changed retry is decided from.
type ChangeFacts struct {
	// Changed: this call already carried the job's change; a job is changed
	// at most once.
	Changed bool
	// Truncate: the pipeline's on_overflow is truncate.
	Truncate bool
	// Cut is the MaxFieldChars that makes the request fit (see FitCut); 0:
	// shortening the record's strings cannot make it fit.
	Cut int
	// JSON: the request asked for JSON mode.
	JSON bool
}

// changedRetry decides whether a rejection is answered with the job's one
// changed retry: a context overflow with truncation allowed and a cut that
// fits, or JSON mode refused on a request that used it.
func changedRetry(a AfterCall) (Reaction, bool) {
	f := a.Change
	if f.Changed {
		return Reaction{}, false
	}
	switch a.Verdict.Reason {
	case ReasonContextLength:
		if f.Truncate && f.Cut > 0 {
			return Reaction{Kind: ReactRetryChanged, Change: Change{MaxFieldChars: f.Cut}}, true
		}
	case ReasonJSONModeRefused:
		if f.JSON {
			return Reaction{Kind: ReactRetryChanged, Change: Change{DropJSON: true}}, true
		}
	}
	return Reaction{}, false
}

// rejectedDetail explains a rejected dead letter whose job had already been
// changed once, or that truncation would not fix.
func rejectedDetail(a AfterCall) string {
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

// FitCut is the MaxFieldChars that makes a request of promptChars
// characters (system and prompt), which the vendor counted as ov, fit the
// model's context less maxTokens. The vendor's counts are used when given;
// otherwise the size is our own estimate (four characters a token, as the
// cost estimate) and the limit the model's context_tokens. 0: the record's
// strings are too short to cut enough, or the limit is unknown.
func FitCut(record any, promptChars int, ov classify.Overflow, contextTokens, maxTokens int) int {
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
