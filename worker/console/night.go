package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/triage-dev/triage/worker/operator"
)

// The night's picture on the batch page: an SVG drawn on the server from
// operator.Timeline (no JavaScript, no chart library). Three bands share
// the time axis: calls per second stacked by class (with the key's pace
// and limit as lines while a worker reports them), the periods something
// held the batch, and the spend adding up.

// Geometry of the picture, in SVG user units.
const (
	nightW      = 960.0
	nightLeft   = 64.0
	nightRight  = 16.0
	callsTop    = 12.0
	callsH      = 150.0
	holdsTop    = callsTop + callsH + 10
	holdsH      = 16.0
	spendTop    = holdsTop + holdsH + 12
	spendH      = 70.0
	axisY       = spendTop + spendH + 16
	nightHeight = axisY + 8
)

// nightChart is what the template draws.
type nightChart struct {
	W, H, PlotW, Left, RightEdge  float64
	CallsTop, CallsBottom, CallsH float64
	HoldsTop, HoldsH, HoldsMid    float64
	SpendTop, SpendBottom, AxisY  float64
	// Bars are the calls per second, stacked by class; Holds the periods
	// something held the batch.
	Bars, Holds []nightRect
	// SpendPath is the spend adding up, an SVG path.
	SpendPath string
	// PaceY and LimitY are the key's pace and limit lines now (nil: none),
	// drawn when the pace has no history; PacePath and LimitPath are the
	// pace and limit over the night from its history ("" : none).
	PaceY, LimitY         *float64
	PaceLabel, LimitLabel string
	PacePath, LimitPath   string
	Ticks                 []nightTick
	// RateMax and SpendMax label the axes; Per is the bucket width.
	RateMax, SpendMax, Per string
	Legend, HoldKinds      []nightLegend
	Calls                  int
	// HoldsSummary says each hold in words, under the picture.
	HoldsSummary []string
}

type nightRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type nightTick struct {
	X      float64
	Label  string
	Anchor string // start | middle | end: the edge labels stay inside
}

type nightLegend struct{ Class, Label string }

// holdLabels say what held the batch.
var holdLabels = map[string]string{
	operator.HoldKey:    "key held (exhausted breaker)",
	operator.HoldStorm:  "storm breaker",
	operator.HoldPaused: "paused by hand",
	operator.HoldBudget: "budget reached",
}

// classLabel names a class in the legend.
func classLabel(c string) string {
	if c == "" {
		return "in flight"
	}
	return c
}

// newNightChart lays t out; nil when the batch has made no call yet.
func newNightChart(t operator.Timeline) *nightChart {
	if len(t.Buckets) == 0 {
		return nil
	}
	c := &nightChart{W: nightW, H: nightHeight, Left: nightLeft, PlotW: nightW - nightLeft - nightRight,
		CallsTop: callsTop, CallsBottom: callsTop + callsH, CallsH: callsH, HoldsTop: holdsTop, HoldsH: holdsH,
		SpendTop: spendTop, SpendBottom: spendTop + spendH, AxisY: axisY, HoldsMid: holdsTop + holdsH/2 + 4,
		RightEdge: nightW - nightRight, Per: describeWidth(t.Width)}
	span := t.End.Sub(t.Start).Seconds()
	x := func(at time.Time) float64 { return nightLeft + at.Sub(t.Start).Seconds()/span*c.PlotW }
	bw := c.PlotW / float64(len(t.Buckets))

	rateMax := t.MaxRatePerS
	lines := []*float64{t.PaceRatePerS, t.LimitPerS}
	if t.PaceHistory {
		lines = nil
		for _, b := range t.Buckets {
			lines = append(lines, b.PaceRatePerS, b.LimitPerS)
		}
	}
	for _, p := range lines {
		if p != nil {
			rateMax = max(rateMax, *p)
		}
	}
	if rateMax <= 0 {
		rateMax = 1
	}
	y := func(rate float64) float64 { return callsTop + callsH - rate/rateMax*callsH }
	for _, b := range t.Buckets {
		c.Calls += b.Total
		base := 0.0
		for _, cl := range t.Classes {
			n := b.Calls[cl]
			if n == 0 {
				continue
			}
			rate := float64(n) / t.Width.Seconds()
			top := y(base + rate)
			c.Bars = append(c.Bars, nightRect{X: x(b.At), Y: top, W: max(bw-0.5, 0.5), H: y(base) - top, Class: classCSS(cl),
				Title: fmt.Sprintf("%s (%s): %d %s, %.2f/s", b.At.Local().Format("15:04:05"), describeWidth(t.Width), n, classLabel(cl), rate)})
			base += rate
		}
	}
	if t.PaceHistory {
		// One level per bucket with a recorded pace; a gap where no worker
		// paced the key.
		var pace, limit strings.Builder
		for _, b := range t.Buckets {
			x0, x1 := x(b.At), x(b.At.Add(t.Width))
			if b.PaceRatePerS != nil {
				fmt.Fprintf(&pace, "M%.1f %.1f H%.1f ", x0, y(*b.PaceRatePerS), x1)
			}
			if b.LimitPerS != nil {
				fmt.Fprintf(&limit, "M%.1f %.1f H%.1f ", x0, y(*b.LimitPerS), x1)
			}
		}
		c.PacePath, c.LimitPath = strings.TrimSpace(pace.String()), strings.TrimSpace(limit.String())
	}
	if t.PaceRatePerS != nil && !t.PaceHistory {
		v := y(*t.PaceRatePerS)
		c.PaceY, c.PaceLabel = &v, fmt.Sprintf("pace %.2f/s", *t.PaceRatePerS)
	}
	if t.LimitPerS != nil && !t.PaceHistory {
		v := y(*t.LimitPerS)
		c.LimitY, c.LimitLabel = &v, fmt.Sprintf("limit %.2f/s", *t.LimitPerS)
	}
	c.RateMax = fmt.Sprintf("%.2g/s", rateMax)

	spendMax := t.SpendUSD
	if spendMax <= 0 {
		spendMax = 1
	}
	var path strings.Builder
	fmt.Fprintf(&path, "M%.1f %.1f", nightLeft, spendTop+spendH)
	for _, b := range t.Buckets {
		fmt.Fprintf(&path, " L%.1f %.1f", x(b.At.Add(t.Width)), spendTop+spendH-b.CumSpendUSD/spendMax*spendH)
	}
	c.SpendPath = path.String()
	c.SpendMax = fmt.Sprintf("$%.4f", t.SpendUSD)

	for _, h := range t.Holds {
		x0, x1 := x(h.From), x(h.To)
		title := holdLabels[h.Kind] + ": " + h.From.Local().Format("15:04:05") + " – "
		if h.Open {
			title += "now"
		} else {
			title += h.To.Local().Format("15:04:05")
		}
		if h.Why != "" {
			title += " (" + h.Why + ")"
		}
		c.Holds = append(c.Holds, nightRect{X: x0, Y: holdsTop, W: max(x1-x0, 2), H: holdsH, Class: "hold-" + h.Kind, Title: title})
		c.HoldsSummary = append(c.HoldsSummary, title)
	}
	for _, k := range []string{operator.HoldKey, operator.HoldStorm, operator.HoldPaused, operator.HoldBudget} {
		c.HoldKinds = append(c.HoldKinds, nightLegend{Class: "hold-" + k, Label: holdLabels[k]})
	}
	for _, cl := range t.Classes {
		c.Legend = append(c.Legend, nightLegend{Class: classCSS(cl), Label: classLabel(cl)})
	}
	// Five time labels, at bucket boundaries.
	layout := "15:04"
	if t.Width < time.Minute {
		layout = "15:04:05"
	}
	if t.End.Sub(t.Start) > 24*time.Hour {
		layout = "Jan 2 15:04"
	}
	for i := 0; i <= 4; i++ {
		at := t.Start.Add(time.Duration(float64(t.End.Sub(t.Start)) * float64(i) / 4))
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		c.Ticks = append(c.Ticks, nightTick{X: x(at), Label: at.Local().Format(layout), Anchor: anchor})
	}
	return c
}

// classCSS is a class's CSS class on the picture.
func classCSS(c string) string {
	if c == "" {
		return "c-inflight"
	}
	return "c-" + c
}

// describeWidth is "per 5 s", "per 10 min", "per 1 h".
func describeWidth(w time.Duration) string {
	switch {
	case w < time.Minute:
		return fmt.Sprintf("per %d s", int(w.Seconds()))
	case w < time.Hour:
		return fmt.Sprintf("per %d min", int(w.Minutes()))
	}
	return fmt.Sprintf("per %d h", int(w.Hours()))
}
