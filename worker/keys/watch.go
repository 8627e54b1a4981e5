package keys

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The safety net: two breakers that watch outcomes, not bodies, for an
// account problem the classifier did not recognise. Both hold the key on
// the exhausted breaker (same fleet-wide pause, same probes, same manual
// resume) with a reason naming the hold and the failure's fingerprint.

// Hold kinds, the first word of the exhausted breaker's reason while the
// safety net holds a key.
const (
	// HoldRejectionStreak: one failure fingerprint rejected several different
	// records in a row with no success between them.
	HoldRejectionStreak = "rejection_streak"
	// HoldThrottleWall: only throttled answers, with no success, for longer
	// than the key's throttle_hold_after.
	HoldThrottleWall = "throttle_wall"
)

// Defaults for WatchSettings.
const (
	// SuspectRejectionsDefault: this many different records rejected in a
	// row with one fingerprint, no success between, hold the key.
	SuspectRejectionsDefault = 8
	// ThrottleHoldAfterDefault: throttled answers with no success for this
	// long hold the key.
	ThrottleHoldAfterDefault = 2 * time.Second
	// ThrottleHoldMin is how many throttled answers the run must hold too,
	// so that two throttles far apart are not a wall.
	ThrottleHoldMin = 4
	// fingerprintMax bounds a fingerprint's length, in bytes.
	fingerprintMax = 160
)

// WatchSettings are one key's safety-net thresholds.
type WatchSettings struct {
	// Rejections in a row that hold the key. Default
	// SuspectRejectionsDefault; negative: off.
	Rejections int
	// ThrottleAfter: a run of throttles this long holds the key. Default
	// ThrottleHoldAfterDefault; negative: off.
	ThrottleAfter time.Duration
}

// WithDefaults fills zero fields with the documented defaults.
func (s WatchSettings) WithDefaults() WatchSettings {
	if s.Rejections == 0 {
		s.Rejections = SuspectRejectionsDefault
	}
	if s.ThrottleAfter == 0 {
		s.ThrottleAfter = ThrottleHoldAfterDefault
	}
	return s
}

// WatchKind is what a call came to, as the safety net hears it.
type WatchKind int

const (
	// WatchOther says nothing (transient, ambiguous, exhausted, no call).
	WatchOther WatchKind = iota
	// WatchSuccess: an answer; ends both runs.
	WatchSuccess
	// WatchRejected: the provider rejected the record.
	WatchRejected
	// WatchThrottled: a throttle that named no wait (one that names its
	// wait is obeyed by pacing and not counted).
	WatchThrottled
)

// WatchEvent is one finished call: the facts the decision needs.
type WatchEvent struct {
	Kind WatchKind
	// Fingerprint of the failure (Fingerprint), for rejections and throttles.
	Fingerprint string
	// Record names the record (batch/record id): a streak counts different
	// records.
	Record string
	// At is when the answer came.
	At time.Time
	// LastSuccess is when the latest success this process heard of was
	// answered (zero: none), for a failure: the success's own report
	// (its completion's write, ResetWatchRun) may land after this
	// failure's on a busy worker, and a run it came into the middle of
	// must start afresh all the same.
	LastSuccess time.Time
}

// WatchState is one key's runs, as this process saw them.
type WatchState struct {
	// Fingerprint and Records of the current rejection streak, and when
	// its first rejection was answered.
	Fingerprint string
	Records     []string
	StreakSince time.Time
	// The current run of throttles: since when, how many, the last one's
	// fingerprint.
	ThrottleSince time.Time
	Throttles     int
	ThrottleFP    string
}

// WatchDecision is what an event leads to.
type WatchDecision struct {
	// Hold is the hold to set ("" none): HoldRejectionStreak or
	// HoldThrottleWall.
	Hold string
	// Fingerprint of the failure that set it.
	Fingerprint string
}

// DecideWatch is the safety net's decision: facts in, the new state and a
// decision out. No I/O, no clock. A decision to hold starts the runs afresh.
func DecideWatch(st WatchState, ev WatchEvent, s WatchSettings) (WatchState, WatchDecision) {
	switch ev.Kind {
	case WatchSuccess:
		// A success answered before a run began (its report, a
		// completion's write, can land seconds after the answer on a busy
		// worker) came between none of the run's failures: the run goes
		// on. Ended by it, a wall of throttles or a streak of rejections
		// from a dead account would be held seconds late, dozens of
		// requests later.
		var next WatchState
		if len(st.Records) > 0 && answeredBefore(ev, st.StreakSince) {
			next.Fingerprint, next.Records, next.StreakSince = st.Fingerprint, st.Records, st.StreakSince
		}
		if st.Throttles > 0 && answeredBefore(ev, st.ThrottleSince) {
			next.ThrottleSince, next.Throttles, next.ThrottleFP = st.ThrottleSince, st.Throttles, st.ThrottleFP
		}
		return next, WatchDecision{}
	case WatchRejected:
		if s.Rejections < 0 {
			return st, WatchDecision{}
		}
		if ev.Fingerprint != st.Fingerprint || successSince(ev, st.StreakSince) {
			st.Fingerprint, st.Records = ev.Fingerprint, nil
		}
		if len(st.Records) == 0 {
			st.StreakSince = ev.At
		}
		for _, r := range st.Records {
			if r == ev.Record {
				return st, WatchDecision{}
			}
		}
		st.Records = append(st.Records, ev.Record)
		if len(st.Records) >= s.Rejections {
			return WatchState{}, WatchDecision{Hold: HoldRejectionStreak, Fingerprint: ev.Fingerprint}
		}
		return st, WatchDecision{}
	case WatchThrottled:
		if s.ThrottleAfter < 0 {
			return st, WatchDecision{}
		}
		if st.Throttles > 0 && successSince(ev, st.ThrottleSince) {
			st.Throttles = 0
		}
		if st.Throttles == 0 {
			st.ThrottleSince = ev.At
		}
		st.Throttles++
		st.ThrottleFP = ev.Fingerprint
		if st.Throttles >= ThrottleHoldMin && ev.At.Sub(st.ThrottleSince) >= s.ThrottleAfter {
			return WatchState{}, WatchDecision{Hold: HoldThrottleWall, Fingerprint: ev.Fingerprint}
		}
		return st, WatchDecision{}
	}
	return st, WatchDecision{}
}

// answeredBefore says whether a success was answered before a run that
// began at since (a success without a time ends every run).
func answeredBefore(ev WatchEvent, since time.Time) bool {
	return !ev.At.IsZero() && ev.At.Before(since)
}

// successSince says whether this process heard of a success answered
// after a run began at since, which the run may not have heard of yet.
// One answered at the same instant (a test's clock standing still) is
// left to the order of the reports, as before.
func successSince(ev WatchEvent, since time.Time) bool {
	return ev.LastSuccess.After(since)
}

// Watch is one key's safety net in this process: the runs (DecideWatch)
// and the hold this process set, so that calls in flight when it was set
// park instead of being dead-lettered. Safe for concurrent use.
type Watch struct {
	settings WatchSettings

	mu    sync.Mutex
	state WatchState
	held  WatchDecision
	gen   int64 // the exhausted breaker's generation the hold opened
	// last is when the latest success Observe heard was answered.
	last time.Time
}

// NewWatch returns a Watch with s (defaults filled in).
func NewWatch(s WatchSettings) *Watch { return &Watch{settings: s.WithDefaults()} }

// Settings returns the watch's settings, defaults filled in.
func (w *Watch) Settings() WatchSettings { return w.settings }

// Observe hears one finished call and returns the decision.
func (w *Watch) Observe(ev WatchEvent) WatchDecision {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Kind == WatchSuccess && ev.At.After(w.last) {
		w.last = ev.At
	}
	var d WatchDecision
	w.state, d = DecideWatch(w.state, ev, w.settings)
	return d
}

// LastSuccess is when the latest success Observe heard was answered (zero:
// none yet): a failure's WatchEvent.LastSuccess.
func (w *Watch) LastSuccess() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Held records that d opens the key's exhausted breaker in generation
// gen. It is called before the breaker's trip makes the hold visible to
// the fleet, so that a call of this process failing with the same error
// meanwhile finds the hold (Parks); undo takes the record back when the
// trip fails, unless a later Held replaced it.
func (w *Watch) Held(d WatchDecision, gen int64) (undo func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prevHeld, prevGen := w.held, w.gen
	w.held, w.gen = d, gen
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.held == d && w.gen == gen {
			w.held, w.gen = prevHeld, prevGen
		}
	}
}

// Parks returns the kind of the hold this process set that a call
// admitted in generation gen whose failure has fingerprint fp is part of
// ("" when none): its record waits for the key to resume instead of being
// dead-lettered (or snoozed).
func (w *Watch) Parks(gen int64, fp string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held.Hold != "" && gen <= w.gen && fp == w.held.Fingerprint {
		return w.held.Hold
	}
	return ""
}

// HeldSince reports whether this process set a hold after a call admitted
// in generation gen was admitted: a job that waited (for its pace) since
// must not call the held key.
func (w *Watch) HeldSince(gen int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held.Hold != "" && gen < w.gen
}

// HoldReason is the exhausted breaker's reason for a hold: its kind and
// the fingerprint.
func HoldReason(d WatchDecision) string { return d.Hold + ": " + d.Fingerprint }

// Hold is a safety-net hold as `triage keys` shows it.
type Hold struct {
	Kind        string `json:"kind"`
	Fingerprint string `json:"fingerprint"`
}

// ParseHold reads a hold from the exhausted breaker's reason; nil when the
// reason is not a hold's.
func ParseHold(reason string) *Hold {
	for _, kind := range []string{HoldRejectionStreak, HoldThrottleWall} {
		if fp, ok := strings.CutPrefix(reason, kind+": "); ok {
			return &Hold{Kind: kind, Fingerprint: fp}
		}
	}
	return nil
}

var (
	fieldRE = map[string]*regexp.Regexp{}
	// idRE: a token holding a digit (ids, counts, hex, timestamps).
	idRE    = regexp.MustCompile(`[\p{L}\p{N}_\-.:/]*\p{N}[\p{L}\p{N}_\-.:/]*`)
	spaceRE = regexp.MustCompile(`\s+`)
)

func init() {
	for _, f := range []string{"type", "code", "message", "msg", "error"} {
		fieldRE[f] = regexp.MustCompile(`"` + f + `"\s*:\s*"((?:[^"\\]|\\.)*)"`)
	}
}

// field returns the first string value of JSON member name in text, read
// with a pattern so that a truncated excerpt still yields it.
func field(text, name string) string {
	m := fieldRE[name].FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	if s, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
		return s
	}
	return m[1]
}

// Fingerprint names a failure by what stays the same when one account
// problem rejects many records: the status, the vendor's error type and
// code, and the message normalised (lower-case, every token holding a
// digit removed, so ids, hex, counts and times drop out; spaces
// collapsed; bounded). body is the error body or excerpt; code the
// vendor code the classifier read ("" if none). Pure; the caller passes
// the result through the redaction boundary.
func Fingerprint(status int, code, body string) string {
	typ := field(body, "type")
	if code == "" {
		code = field(body, "code")
	}
	msg := field(body, "message")
	if msg == "" {
		msg = field(body, "msg")
	}
	if msg == "" {
		msg = field(body, "error")
	}
	if msg == "" && typ == "" && code == "" {
		msg = body
	}
	msg = strings.ToLower(msg)
	msg = idRE.ReplaceAllString(msg, "")
	msg = strings.TrimSpace(spaceRE.ReplaceAllString(msg, " "))
	out := strconv.Itoa(status)
	for _, part := range []string{typ, code} {
		if part != "" {
			out += " " + strings.ToLower(idRE.ReplaceAllString(part, ""))
		}
	}
	out += ": " + msg
	if len(out) > fingerprintMax {
		// Cut on a byte boundary; an incomplete last rune is dropped.
		out = strings.ToValidUTF8(out[:fingerprintMax], "")
	}
	return strings.TrimSpace(out)
}
