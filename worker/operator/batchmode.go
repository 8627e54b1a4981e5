package operator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/triage-dev/triage/ledger"
)

// How batch mode reads for a person, the same in `triage status` and on the
// batch page: provider batches in flight, the batch's deadline.

// countOrder is the order request counts read best in: the whole first,
// then what is running, what succeeded, what did not.
var countOrder = []string{"total", "processing", "completed", "succeeded", "failed", "errored", "canceled", "expired"}

// DescribeCounts is a provider batch's request_counts as
// "total 4, completed 1" (the vendor's names, zeros left out: Anthropic
// reports five counts, most of them 0 until the batch ends); "-" before
// the first poll or while every count is 0.
func DescribeCounts(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return "-"
	}
	names := make([]string, 0, len(m))
	for k, v := range m {
		if n, ok := v.(float64); !ok || n != 0 {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return "-"
	}
	rank := func(k string) int {
		if i := slices.Index(countOrder, k); i >= 0 {
			return i
		}
		return len(countOrder)
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %v", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// RoundAge is a span as a person reads an age or a time left: "45s",
// "12m", "7h45m", "2d3h".
func RoundAge(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%02dm", h, m)
		}
		return fmt.Sprintf("%dh", h)
	}
	days, h := int(d.Hours())/24, int(d.Hours())%24
	if h != 0 {
		return fmt.Sprintf("%dd%dh", days, h)
	}
	return fmt.Sprintf("%dd", days)
}

// ProviderID is the vendor's id of a provider batch, or "#12 (not
// submitted)" before the provider has it.
func ProviderID(p ledger.ProviderBatchStatus) string {
	if p.ProviderBatchID != nil {
		return *p.ProviderBatchID
	}
	return fmt.Sprintf("#%d (not submitted)", p.ID)
}

// ProviderState is triage's state with the vendor's word and a pending
// cancel: "submitted: in_progress, cancel requested".
func ProviderState(p ledger.ProviderBatchStatus) string {
	s := p.State
	if p.VendorStatus != nil && *p.VendorStatus != "" {
		s += ": " + *p.VendorStatus
	}
	if p.CancelRequested {
		s += ", cancel requested"
	}
	return s
}

// ProviderLines is "120", or "40 of 120" when the provider batch also
// holds other batches' lines.
func ProviderLines(p ledger.ProviderBatchStatus) string {
	if p.BatchLines == p.Lines {
		return fmt.Sprint(p.Lines)
	}
	return fmt.Sprintf("%d of %d", p.BatchLines, p.Lines)
}

// ProviderAge is how long the provider batch has run: "1h30m".
func ProviderAge(p ledger.ProviderBatchStatus) string {
	return RoundAge(time.Duration(p.AgeS) * time.Second)
}

// ProviderExpiresIn is "22h30m", "expired 5m ago", or "-" when unknown.
func ProviderExpiresIn(p ledger.ProviderBatchStatus) string {
	switch {
	case p.ExpiresInS == nil:
		return "-"
	case *p.ExpiresInS < 0:
		return "expired " + RoundAge(time.Duration(*p.ExpiresInS)*time.Second) + " ago"
	}
	return RoundAge(time.Duration(*p.ExpiresInS) * time.Second)
}

// DescribeDeadline is a deadline in local time with what is left:
// "2026-12-02 06:00 CET (in 7h45m)", "... (passed 10m ago)".
func DescribeDeadline(at, now time.Time) string {
	s := at.Local().Format("2006-01-02 15:04 MST")
	if left := at.Sub(now); left > 0 {
		return s + " (in " + RoundAge(left) + ")"
	}
	return s + " (passed " + RoundAge(now.Sub(at)) + " ago)"
}

// ProviderBatchRow is one provider batch in flight as a person reads it,
// the same on the batch page and in `triage status`.
type ProviderBatchRow struct {
	Batch       string // the triage batch whose lines it holds
	ID          string // ProviderID
	Vendor      string
	State       string // ProviderState
	Counts      string // DescribeCounts
	Lines       string // ProviderLines
	Age         string // ProviderAge
	ExpiresIn   string // ProviderExpiresIn
	CancelAsked bool
	// LastError is why the submitter's last request about it failed
	// (status and vendor code only); "" when the last one succeeded. While
	// set, State and Counts are stale.
	LastError string
}

// ProviderRows are the rows of st's provider batches in flight, oldest
// first; none when it has none.
func ProviderRows(st ledger.Status) []ProviderBatchRow {
	out := make([]ProviderBatchRow, len(st.ProviderBatches))
	for i, p := range st.ProviderBatches {
		out[i] = ProviderBatchRow{Batch: st.Batch, ID: ProviderID(p), Vendor: p.Vendor, State: ProviderState(p),
			Counts: DescribeCounts(p.Counts), Lines: ProviderLines(p), Age: ProviderAge(p), ExpiresIn: ProviderExpiresIn(p),
			CancelAsked: p.CancelRequested}
		if p.LastError != nil {
			out[i].LastError = *p.LastError
		}
	}
	return out
}

// ProviderRows are the view's provider batches in flight (ProviderRows).
func (v BatchView) ProviderRows() []ProviderBatchRow { return ProviderRows(v.Status) }

// Deadline is the batch's deadline with what is left (DescribeDeadline),
// "" when it has none.
func (v BatchView) Deadline() string {
	if v.Status.Deadline == nil {
		return ""
	}
	return DescribeDeadline(*v.Status.Deadline, time.Now())
}
