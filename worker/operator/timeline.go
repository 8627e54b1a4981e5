package operator

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/keys"
)

// A picture of the night: a batch's calls per second by class, its spend
// over time, the key's pace against its limit while a worker reports one,
// and the periods a breaker, a pause or the budget held it. BuildTimeline
// and HoldPeriods decide it from the ledger's rows without I/O or a clock;
// BatchTimeline reads them.

// TimelineBucketsMax is how many buckets a timeline has at most.
const TimelineBucketsMax = 120

// bucketWidths are the widths a timeline's buckets may have: round ones,
// so a person reads "per 5 min" rather than "per 4m37s".
var bucketWidths = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour}

// BucketWidth is the smallest round width that covers span in at most max
// buckets (the largest one beyond).
func BucketWidth(span time.Duration, n int) time.Duration {
	n = cmpOrInt(n, TimelineBucketsMax)
	for _, w := range bucketWidths {
		if span <= time.Duration(n)*w {
			return w
		}
	}
	return bucketWidths[len(bucketWidths)-1]
}

func cmpOrInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// TimelineClasses are the classes in the order a timeline stacks them; ""
// is an attempt with no class recorded (in flight).
var TimelineClasses = []string{"ok", "transient", "throttled", "exhausted", "rejected", "ambiguous", ""}

// Timeline is a batch's night.
type Timeline struct {
	// Start and End bound it; Width is each bucket's.
	Start, End time.Time
	Width      time.Duration
	Buckets    []TimelineBucket
	// Classes are the classes with calls, in TimelineClasses order.
	Classes []string
	// MaxRatePerS is the highest bucket's calls per second; SpendUSD the
	// spend at End (billed and possibly billed).
	MaxRatePerS float64
	SpendUSD    float64
	// PaceRatePerS is the requests per second the fleet paces the key at,
	// LimitPerS the provider's limit from its rate-limit headers, while a
	// worker reports them (nil: none recorded).
	PaceRatePerS, LimitPerS *float64
	// PaceHistory: some bucket has the key's pace from its history
	// (AttachPace); the buckets' PaceRatePerS and LimitPerS draw it.
	PaceHistory bool
	Holds       []HoldPeriod
}

// TimelineBucket is one bucket: calls started in [At, At+Width).
type TimelineBucket struct {
	At time.Time
	// Calls by class.
	Calls map[string]int
	Total int
	// RatePerS is Total per second of the bucket.
	RatePerS float64
	// SpendUSD is what the bucket's calls cost (billed and possibly
	// billed); CumSpendUSD the spend up to the bucket's end.
	SpendUSD, CumSpendUSD float64
	// PaceRatePerS and LimitPerS are the key's pace and limit in the
	// bucket from its pace history (the latest point in it); nil: none
	// recorded (no worker paced the key then).
	PaceRatePerS, LimitPerS *float64
}

// AttachPace puts the key's pace history (ledger.PaceHistory, oldest
// first) into t's buckets: each bucket gets the latest point within it.
func AttachPace(t Timeline, points []ledger.PacePoint) Timeline {
	if t.Width <= 0 {
		return t
	}
	for _, p := range points {
		if p.At.Before(t.Start) {
			continue
		}
		i := int(p.At.Sub(t.Start) / t.Width)
		if i >= len(t.Buckets) {
			continue
		}
		r := p.RatePerS
		t.Buckets[i].PaceRatePerS, t.Buckets[i].LimitPerS = &r, p.LimitPerS
		t.PaceHistory = true
	}
	return t
}

// BuildTimeline lays rows (ledger.BatchTimeline with origin start and this
// width) out in buckets from start to end, empty ones included.
func BuildTimeline(start, end time.Time, width time.Duration, rows []ledger.TimelineRow) Timeline {
	t := Timeline{Start: start, End: end, Width: width}
	if width <= 0 || !end.After(start) {
		t.End = start.Add(max(width, time.Second))
	}
	n := max(int((t.End.Sub(start)+width-1)/width), 1)
	t.Buckets = make([]TimelineBucket, n)
	for i := range t.Buckets {
		t.Buckets[i] = TimelineBucket{At: start.Add(time.Duration(i) * width), Calls: map[string]int{}}
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Bucket < 0 {
			continue
		}
		for r.Bucket >= len(t.Buckets) { // an attempt started after end
			t.Buckets = append(t.Buckets, TimelineBucket{At: start.Add(time.Duration(len(t.Buckets)) * width), Calls: map[string]int{}})
		}
		b := &t.Buckets[r.Bucket]
		b.Calls[r.Class] += r.Calls
		b.Total += r.Calls
		b.SpendUSD += r.SpendUSD + r.PossiblyBilledUSD
		seen[r.Class] = true
	}
	t.End = start.Add(time.Duration(len(t.Buckets)) * width)
	cum := 0.0
	for i := range t.Buckets {
		b := &t.Buckets[i]
		b.RatePerS = float64(b.Total) / width.Seconds()
		cum += b.SpendUSD
		b.CumSpendUSD = cum
		t.MaxRatePerS = max(t.MaxRatePerS, b.RatePerS)
	}
	t.SpendUSD = cum
	for _, c := range TimelineClasses {
		if seen[c] {
			t.Classes = append(t.Classes, c)
		}
	}
	return t
}

// Hold kinds of a HoldPeriod.
const (
	HoldKey    = "key_held" // the key's exhausted breaker (out of money, invalid, safety net)
	HoldStorm  = "storm"    // the key's storm breaker
	HoldPaused = "paused"   // the batch paused by hand
	HoldBudget = "budget"   // the batch at its spend cap
)

// HoldPeriod is a span during which something held the batch or its key.
type HoldPeriod struct {
	Kind string
	// Why is the alert that began it ("" when it holds now with no alert).
	Why      string
	From, To time.Time
	// Open: it still holds (To is the timeline's end).
	Open bool
}

// HoldFacts are what HoldPeriods decides from.
type HoldFacts struct {
	// Alerts about the batch and its key, oldest first.
	Alerts []ledger.AlertRow
	// Timeline's buckets tell when calls were made again.
	Timeline Timeline
	// HeldNow: the hold kinds that hold now, with since when (zero: not
	// known).
	HeldNow map[string]time.Time
}

var (
	holdStarts = map[string]string{"key_exhausted": HoldKey, "key_suspect": HoldKey, "storm_open": HoldStorm,
		"batch_paused": HoldPaused, "budget_reached": HoldBudget}
	holdEnds = map[string][]string{"key_resumed": {HoldKey, HoldStorm}, "batch_resumed": {HoldPaused},
		"batch_cancelled": {HoldPaused}, "batch_budget": {HoldBudget}}
)

// HoldPeriods decides when something held the batch: a period begins with
// its alert and ends at the alert that ends it (a resume, a new budget), or
// else when calls went on (an answered call, for a key's breaker: probes
// are calls made while it holds), or at the timeline's end while it holds
// now. A hold that holds now with no alert in the window begins when it
// began, or at the last bucket when that is unknown.
func HoldPeriods(f HoldFacts) []HoldPeriod {
	t := f.Timeline
	var out []HoldPeriod
	open := map[string]int{} // kind → index in out
	callsAfter := func(kind string, from time.Time) (time.Time, bool) {
		for _, b := range t.Buckets {
			if !b.At.After(from) {
				continue
			}
			if (kind == HoldKey || kind == HoldStorm) && b.Calls["ok"] == 0 {
				continue
			}
			if b.Total > 0 {
				return b.At, true
			}
		}
		return time.Time{}, false
	}
	closeAt := func(kind string, at time.Time) {
		if i, ok := open[kind]; ok {
			out[i].To = at
			delete(open, kind)
		}
	}
	for _, a := range f.Alerts {
		for _, kind := range holdEnds[a.Kind] {
			closeAt(kind, a.CreatedAt)
		}
		kind, ok := holdStarts[a.Kind]
		if !ok {
			continue
		}
		if i, ok := open[kind]; ok {
			// Held again before it ended: it ended when calls went on, if
			// they did in between; else it is the same hold.
			if at, ok := callsAfter(kind, out[i].From); ok && at.Before(a.CreatedAt) {
				closeAt(kind, at)
			} else {
				continue
			}
		}
		open[kind] = len(out)
		out = append(out, HoldPeriod{Kind: kind, Why: a.Message, From: a.CreatedAt})
	}
	for kind, i := range open {
		if _, held := f.HeldNow[kind]; held {
			out[i].To, out[i].Open = t.End, true
			continue
		}
		if at, ok := callsAfter(kind, out[i].From); ok {
			out[i].To = at
		} else {
			out[i].To = t.End
		}
	}
	for _, kind := range []string{HoldKey, HoldStorm, HoldPaused, HoldBudget} {
		since, held := f.HeldNow[kind]
		if !held || slices.ContainsFunc(out, func(p HoldPeriod) bool { return p.Kind == kind && p.Open }) {
			continue
		}
		from := since
		if from.IsZero() {
			from = t.End.Add(-t.Width)
		}
		out = append(out, HoldPeriod{Kind: kind, From: from, To: t.End, Open: true})
	}
	for i := range out {
		out[i].From = maxTime(out[i].From, t.Start)
		out[i].To = minTime(maxTime(out[i].To, out[i].From), t.End)
	}
	slices.SortStableFunc(out, func(a, b HoldPeriod) int { return a.From.Compare(b.From) })
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// HeldNow is what holds the batch now, with since when where known, for
// HoldFacts.
func HeldNow(v BatchView) map[string]time.Time {
	out := map[string]time.Time{}
	ks := v.Key
	switch v.Status.State {
	case ledger.BatchPaused:
		out[HoldPaused] = time.Time{}
	case ledger.BatchPausedBudget:
		out[HoldBudget] = time.Time{}
	case ledger.BatchPausedExhausted:
		var since time.Time
		if ks != nil && ks.OpenedAt != nil {
			since = *ks.OpenedAt
		}
		out[HoldKey] = since
	}
	if ks != nil && ks.Storm.State != "" && ks.Storm.State != keys.StateClosed {
		var since time.Time
		if ks.Storm.OpenedAt != nil {
			since = *ks.Storm.OpenedAt
		}
		out[HoldStorm] = since
	}
	return out
}

// BatchTimeline reads the batch's night from the ledger, up to now for a
// batch not settled, and decides its buckets and holds.
func BatchTimeline(ctx context.Context, pool *pgxpool.Pool, v BatchView) (Timeline, error) {
	first, last, ok, err := ledger.BatchTimeSpan(ctx, pool, v.Status.Batch)
	if err != nil || !ok {
		return Timeline{}, err
	}
	now := time.Now()
	if v.Key != nil && !v.Key.Now.IsZero() {
		now = v.Key.Now
	}
	end := last
	if v.Status.State != ledger.BatchSettled && now.After(end) {
		end = now
	}
	width := BucketWidth(end.Sub(first), TimelineBucketsMax)
	start := first.Truncate(width)
	rows, err := ledger.BatchTimeline(ctx, pool, v.Status.Batch, start, width)
	if err != nil {
		return Timeline{}, err
	}
	t := BuildTimeline(start, end, width, rows)
	alerts, err := ledger.AlertsAbout(ctx, pool, v.Status.Key, v.Status.Batch, t.Start, t.End, 0)
	if err != nil {
		return Timeline{}, err
	}
	t.Holds = HoldPeriods(HoldFacts{Alerts: alerts, Timeline: t, HeldNow: HeldNow(v)})
	points, err := ledger.PaceHistory(ctx, pool, v.Status.Key, t.Start, t.End)
	if err != nil {
		return Timeline{}, err
	}
	t = AttachPace(t, points)
	pacing, err := keys.DefaultStore(pool).ListPacing(ctx)
	if err != nil {
		return Timeline{}, err
	}
	for _, p := range pacing {
		if p.Key != v.Status.Key {
			continue
		}
		if p.RatePerS > 0 {
			r := p.RatePerS
			t.PaceRatePerS = &r
		}
		if p.LimitRequests != nil && *p.LimitRequests > 0 {
			// The headers' request limit is per minute for the vendors
			// triage knows.
			l := float64(*p.LimitRequests) / 60
			t.LimitPerS = &l
		}
	}
	return t, nil
}
