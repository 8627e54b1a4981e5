package keys

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecideWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rej := func(fp, rec string) WatchEvent {
		return WatchEvent{Kind: WatchRejected, Fingerprint: fp, Record: rec, At: t0}
	}
	thr := func(ms int) WatchEvent {
		return WatchEvent{Kind: WatchThrottled, Fingerprint: "429 gate", Record: "r", At: at(ms)}
	}
	rejAt := func(ms int, rec string) WatchEvent {
		return WatchEvent{Kind: WatchRejected, Fingerprint: "a", Record: rec, At: at(ms)}
	}
	ok := WatchEvent{Kind: WatchSuccess, At: t0}
	three := WatchSettings{Rejections: 3, ThrottleAfter: time.Second}
	for _, tc := range []struct {
		name     string
		s        WatchSettings
		events   []WatchEvent
		wantHold string // the last event's decision
		wantFP   string
	}{
		{"three records, one fingerprint: held", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r2"), rej("a", "r3")}, HoldRejectionStreak, "a"},
		{"two are not enough", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r2")}, "", ""},
		{"a success between starts over", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r2"), ok, rej("a", "r3")}, "", ""},
		{"the same record twice counts once", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r1"), rej("a", "r2")}, "", ""},
		{"another fingerprint starts over", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r2"), rej("b", "r3"), rej("b", "r4")}, "", ""},
		{"the new fingerprint's streak holds", three,
			[]WatchEvent{rej("a", "r1"), rej("b", "r2"), rej("b", "r3"), rej("b", "r4")}, HoldRejectionStreak, "b"},
		{"throttles between rejections do not break the streak", three,
			[]WatchEvent{rej("a", "r1"), thr(0), rej("a", "r2"), rej("a", "r3")}, HoldRejectionStreak, "a"},
		{"the streak off", WatchSettings{Rejections: -1, ThrottleAfter: time.Second},
			[]WatchEvent{rej("a", "r1"), rej("a", "r2"), rej("a", "r3"), rej("a", "r4")}, "", ""},
		{"a throttle wall past the window: held", three,
			[]WatchEvent{thr(0), thr(300), thr(600), thr(1000)}, HoldThrottleWall, "429 gate"},
		{"throttles inside the window are not a wall", three,
			[]WatchEvent{thr(0), thr(300), thr(600), thr(900)}, "", ""},
		{"two throttles far apart are not a wall", three,
			[]WatchEvent{thr(0), thr(5000)}, "", ""},
		{"a success ends the wall", three,
			[]WatchEvent{thr(0), thr(300), thr(600), ok, thr(1000)}, "", ""},
		{"a success answered before the wall began, heard late, does not end it", three,
			[]WatchEvent{thr(100), thr(400), thr(700), {Kind: WatchSuccess, At: at(50)}, thr(1100)}, HoldThrottleWall, "429 gate"},
		{"a success answered during the wall ends it", three,
			[]WatchEvent{thr(100), thr(400), thr(700), {Kind: WatchSuccess, At: at(700)}, thr(1100)}, "", ""},
		{"a success answered before the wall still ends a rejection streak", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r2"), thr(100), {Kind: WatchSuccess, At: at(50)}, rej("a", "r3")}, "", ""},
		{"a success answered before the streak's first rejection, heard late, does not end it", three,
			[]WatchEvent{rejAt(100, "r1"), rejAt(200, "r2"), {Kind: WatchSuccess, At: at(50)}, rejAt(300, "r3")}, HoldRejectionStreak, "a"},
		{"a success answered during the streak ends it", three,
			[]WatchEvent{rejAt(100, "r1"), rejAt(200, "r2"), {Kind: WatchSuccess, At: at(100)}, rejAt(300, "r3")}, "", ""},
		{"a success answered before a new fingerprint's streak does not end it", three,
			[]WatchEvent{rejAt(10, "r0"), rej("b", "r1"), rejAt(100, "r2"), rejAt(200, "r3"), {Kind: WatchSuccess, At: at(50)}, rejAt(300, "r4")}, HoldRejectionStreak, "a"},
		{"a success answered before the streak still ends a wall of throttles", three,
			[]WatchEvent{thr(0), thr(300), rejAt(400, "r1"), {Kind: WatchSuccess, At: at(350)}, thr(600), thr(1000)}, "", ""},
		{"a success heard here, not yet reported, starts the streak afresh", three,
			[]WatchEvent{rejAt(100, "r1"), rejAt(200, "r2"), {Kind: WatchRejected, Fingerprint: "a", Record: "r3", At: at(300), LastSuccess: at(150)}}, "", ""},
		{"a success heard here before the streak began does not", three,
			[]WatchEvent{rejAt(100, "r1"), rejAt(200, "r2"), {Kind: WatchRejected, Fingerprint: "a", Record: "r3", At: at(300), LastSuccess: at(50)}}, HoldRejectionStreak, "a"},
		{"the streak a success heard here restarted holds on its own count", three,
			[]WatchEvent{rejAt(100, "r1"), {Kind: WatchRejected, Fingerprint: "a", Record: "r2", At: at(200), LastSuccess: at(150)},
				{Kind: WatchRejected, Fingerprint: "a", Record: "r3", At: at(300), LastSuccess: at(150)},
				{Kind: WatchRejected, Fingerprint: "a", Record: "r4", At: at(400), LastSuccess: at(150)}}, HoldRejectionStreak, "a"},
		{"a success heard here at the streak's very instant does not", three,
			[]WatchEvent{rejAt(100, "r1"), rejAt(200, "r2"), {Kind: WatchRejected, Fingerprint: "a", Record: "r3", At: at(300), LastSuccess: at(100)}}, HoldRejectionStreak, "a"},
		{"a success heard here, not yet reported, starts the wall afresh", three,
			[]WatchEvent{thr(0), thr(300), thr(600), {Kind: WatchThrottled, Fingerprint: "429 gate", Record: "r", At: at(1000), LastSuccess: at(500)}}, "", ""},
		{"the wall off", WatchSettings{Rejections: 3, ThrottleAfter: -1},
			[]WatchEvent{thr(0), thr(300), thr(600), thr(5000)}, "", ""},
		{"other outcomes say nothing", three,
			[]WatchEvent{rej("a", "r1"), rej("a", "r2"), {Kind: WatchOther}, rej("a", "r3")}, HoldRejectionStreak, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st WatchState
			var d WatchDecision
			for _, ev := range tc.events {
				st, d = DecideWatch(st, ev, tc.s)
			}
			require.Equal(t, tc.wantHold, d.Hold)
			require.Equal(t, tc.wantFP, d.Fingerprint)
			if d.Hold != "" {
				require.Equal(t, WatchState{}, st, "a hold starts the runs afresh")
			}
		})
	}
}

func TestWatchSettingsDefaults(t *testing.T) {
	require.Equal(t, WatchSettings{Rejections: SuspectRejectionsDefault, ThrottleAfter: ThrottleHoldAfterDefault}, WatchSettings{}.WithDefaults())
	require.Equal(t, WatchSettings{Rejections: -1, ThrottleAfter: -1}, WatchSettings{Rejections: -1, ThrottleAfter: -1}.WithDefaults())
}

func TestWatchParksOnlyTheHoldsCalls(t *testing.T) {
	w := NewWatch(WatchSettings{})
	require.Empty(t, w.Parks(3, "fp"))
	w.Held(WatchDecision{Hold: HoldRejectionStreak, Fingerprint: "fp"}, 4)
	require.Equal(t, HoldRejectionStreak, w.Parks(3, "fp"), "a call in flight when the hold opened")
	require.Equal(t, HoldRejectionStreak, w.Parks(4, "fp"), "the hold's probe")
	require.Empty(t, w.Parks(5, "fp"), "after the key resumed")
	require.Empty(t, w.Parks(3, "other"), "another failure")
	require.True(t, w.HeldSince(3))
	require.False(t, w.HeldSince(4))
}

// A hold whose trip failed is taken back; a later hold is not.
func TestWatchHeldUndo(t *testing.T) {
	w := NewWatch(WatchSettings{})
	undo := w.Held(WatchDecision{Hold: HoldRejectionStreak, Fingerprint: "fp"}, 4)
	undo()
	require.Empty(t, w.Parks(3, "fp"), "the trip failed: no hold")
	first := w.Held(WatchDecision{Hold: HoldRejectionStreak, Fingerprint: "fp"}, 4)
	w.Held(WatchDecision{Hold: HoldThrottleWall, Fingerprint: "wall"}, 6)
	first()
	require.Equal(t, HoldThrottleWall, w.Parks(5, "wall"), "a later hold stays")
}

func TestFingerprint(t *testing.T) {
	a := `{"error":{"message":"The request was declined: context handle zq-1185 is not in a usable state (ref 7f3a9c2e)","type":"invalid_request_error","param":null,"code":"handle_state_invalid"}}`
	b := `{"error":{"message":"The request was declined: context handle zq-2291 is not in a usable state (ref 0b7e11aa)","type":"invalid_request_error","param":null,"code":"handle_state_invalid"}}`
	fp := Fingerprint(400, "", a)
	require.Equal(t, "400 invalid_request_error handle_state_invalid: the request was declined: context handle is not in a usable state (ref )", fp)
	require.Equal(t, fp, Fingerprint(400, "", b), "ids and hex drop out")
	require.Equal(t, fp, Fingerprint(400, "handle_state_invalid", "rejected: 400\n"+a), "a dead letter's excerpt, detail first")
	require.Equal(t, fp, Fingerprint(400, "handle_state_invalid", a[:len(a)-30]), "a truncated excerpt")
	require.NotEqual(t, fp, Fingerprint(429, "", a), "the status counts")

	over := `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	require.Equal(t, "400 invalid_request_error context_length_exceeded: this model's maximum context length is tokens. however, your messages resulted in tokens.",
		Fingerprint(400, "context_length_exceeded", over))
	require.Equal(t, "502: bad gateway", Fingerprint(502, "", "Bad   Gateway 0x1f"), "not JSON: the text")
	require.Equal(t, "400: 余额不足", Fingerprint(400, "", `{"msg":"余额不足 1234"}`))
	long := Fingerprint(400, "", `{"message":"`+repeat("é", 200)+`"}`)
	require.LessOrEqual(t, len(long), fingerprintMax)
	require.True(t, utf8Valid(long))
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func utf8Valid(s string) bool {
	for _, r := range s {
		if r == '\uFFFD' {
			return false
		}
	}
	return true
}

func TestParseHold(t *testing.T) {
	d := WatchDecision{Hold: HoldThrottleWall, Fingerprint: "429 requests gate_declined: declined"}
	require.Equal(t, &Hold{Kind: HoldThrottleWall, Fingerprint: d.Fingerprint}, ParseHold(HoldReason(d)))
	require.Nil(t, ParseHold("insufficient_quota"))
	require.Nil(t, ParseHold(""))
}
