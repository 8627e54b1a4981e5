package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/triage-dev/triage/ledger"
)

// DeadLetterFilter selects dead letters for a listing: `triage dlq list
// [--batch B] [--class C] [--reason R]` and the page's query parameters.
type DeadLetterFilter struct {
	Batch  string
	Class  string
	Reason string
	// Unknown keeps only the errors no classifier rule knew (a default
	// verdict, known:false): `triage dlq list --unknown`, `unknown=1`.
	Unknown bool
	// Suspect keeps only the suspect dead letters: `triage dlq list
	// --suspect`, `suspect=1`.
	Suspect bool
}

// ListDeadLetters returns the dead letters not requeued that match f, oldest
// first. An unknown batch or class is an InputError.
func ListDeadLetters(ctx context.Context, db ledger.DBTX, f DeadLetterFilter) ([]ledger.DeadLetter, error) {
	if err := CheckClass(f.Class); err != nil {
		return nil, err
	}
	if f.Batch != "" {
		if err := CheckBatch(ctx, db, f.Batch); err != nil {
			return nil, err
		}
	}
	return ledger.ListDeadLetters(ctx, db, ledger.DeadLetterFilter{Batch: f.Batch, Class: f.Class, Reason: f.Reason, Unknown: f.Unknown, Suspect: f.Suspect})
}

// ListItems returns dls in the exact `triage dlq list --json` shape: an
// array, [] when empty, never null.
func ListItems(dls []ledger.DeadLetter) []ledger.DeadLetterListItem {
	items := make([]ledger.DeadLetterListItem, len(dls))
	for i, dl := range dls {
		items[i] = dl.ListItem()
	}
	return items
}

// DeadLetterGroup is one class/reason line of a dead-letter summary.
type DeadLetterGroup struct {
	Class, Reason string
	Count         int
	// Codes are the distinct "status code" pairs, in order of first sight.
	Codes []string
}

// GroupDeadLetters groups dls by class and reason, largest group first.
func GroupDeadLetters(dls []ledger.DeadLetter) []*DeadLetterGroup {
	var out []*DeadLetterGroup
	idx := map[[2]string]*DeadLetterGroup{}
	for _, dl := range dls {
		k := [2]string{dl.Class, dl.Reason}
		g := idx[k]
		if g == nil {
			g = &DeadLetterGroup{Class: dl.Class, Reason: dl.Reason}
			idx[k] = g
			out = append(out, g)
		}
		g.Count++
		if c := StatusCode(dl); c != "" && !slices.Contains(g.Codes, c) {
			g.Codes = append(g.Codes, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *DeadLetterGroup) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Class+"/"+a.Reason, b.Class+"/"+b.Reason)
	})
	return out
}

// StatusCode is "400 invalid_request_error", "503", "context_length_exceeded" or "".
func StatusCode(dl ledger.DeadLetter) string {
	var parts []string
	if dl.HTTPStatus != 0 {
		parts = append(parts, strconv.Itoa(dl.HTTPStatus))
	}
	if dl.VendorCode != "" {
		parts = append(parts, dl.VendorCode)
	}
	return strings.Join(parts, " ")
}

// DeadLetterDetail is one dead letter with its input record: `triage dlq
// show --json` and the detail page.
type DeadLetterDetail struct {
	ledger.DeadLetter
	// Record is the input record as enqueued; nil when it is gone.
	Record json.RawMessage
	// Calls are the record's attempts in the batch, oldest first: a record
	// whose request was changed once (truncated, JSON mode dropped) shows
	// both calls, each with its change and idempotency key.
	Calls []ledger.Attempt
	// Partial is what the job's latest cut stream delivered; nil when no
	// attempt of the job was a cut stream.
	Partial *StreamPartial
}

// StreamPartial is a cut stream's partial output as the ledger keeps it.
type StreamPartial struct {
	Text         string `json:"text"`
	Chars        int    `json:"chars"`
	OutputTokens int    `json:"output_tokens"`
}

// GetDeadLetter reads one dead letter and its record. An unknown id is an
// InputError.
func GetDeadLetter(ctx context.Context, db ledger.DBTX, id int64) (DeadLetterDetail, error) {
	dl, err := ledger.GetDeadLetter(ctx, db, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return DeadLetterDetail{}, inputErrorf("no dead letter with id %d (see `triage dlq list`)", id)
	}
	if err != nil {
		return DeadLetterDetail{}, err
	}
	d := DeadLetterDetail{DeadLetter: dl}
	recs, err := ledger.Records(ctx, db, dl.Batch, []string{dl.RecordID})
	if err != nil {
		return DeadLetterDetail{}, err
	}
	if len(recs) == 1 {
		d.Record = recs[0].Data
	}
	calls, err := ledger.ListAttempts(ctx, db, ledger.AttemptFilter{Batch: dl.Batch, RecordID: dl.RecordID})
	if err != nil {
		return DeadLetterDetail{}, err
	}
	slices.Reverse(calls)
	d.Calls = calls
	if dl.JobID != 0 {
		text, tokens, ok, err := ledger.LatestPartial(ctx, db, dl.JobID)
		if err != nil {
			return DeadLetterDetail{}, err
		}
		if ok {
			d.Partial = &StreamPartial{Text: text, Chars: utf8.RuneCountInString(text), OutputTokens: tokens}
		}
	}
	return d, nil
}

// MarshalJSON is the ledger's detail shape (the list fields, then job_id,
// pipeline, key, request, error_excerpt, requeued_at) plus "record": the
// input record as enqueued, null if it is gone, "calls": the record's
// attempts, oldest first, in `triage ledger`'s attempt shape, and "partial":
// a cut stream's text and tokens, null when there was none.
func (d DeadLetterDetail) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(d.DeadLetter)
	if err != nil {
		return nil, err
	}
	record := d.Record
	if len(record) == 0 {
		record = json.RawMessage("null")
	}
	rec, err := json.Marshal(record)
	if err != nil {
		return nil, err
	}
	// b is an object: splice "record" in before its closing brace.
	b = bytes.TrimRight(b, " \n")
	calls := d.Calls
	if calls == nil {
		calls = []ledger.Attempt{}
	}
	cs, err := json.Marshal(calls)
	if err != nil {
		return nil, err
	}
	out := append(b[:len(b)-1:len(b)-1], `,"record":`...)
	out = append(out, rec...)
	out = append(out, `,"calls":`...)
	out = append(out, cs...)
	part, err := json.Marshal(d.Partial)
	if err != nil {
		return nil, err
	}
	out = append(out, `,"partial":`...)
	out = append(out, part...)
	return append(out, '}'), nil
}

// DescribeResolution says how a call whose answer was lost came out, for a
// person: "found by look-up, billed once", "resent", "dead-lettered, not
// resent", "still unknown"; "" for a call whose answer arrived.
func DescribeResolution(r ledger.Resolution) string {
	switch r {
	case ledger.ResolutionFound:
		return "found by look-up, billed once"
	case ledger.ResolutionResent:
		return "resent (possibly billed twice)"
	case ledger.ResolutionDeadLettered:
		return "dead-lettered, not resent"
	case ledger.ResolutionUnknown:
		return "still unknown"
	}
	return ""
}

// DescribeLostAnswers is "2: 1 found by look-up, 1 resent, 0
// dead-lettered, 0 still unknown".
func DescribeLostAnswers(l ledger.LostAnswers) string {
	return fmt.Sprintf("%d: %d found by look-up, %d resent, %d dead-lettered, %d still unknown",
		l.Total(), l.Found, l.Resent, l.DeadLettered, l.Unknown)
}
