package console

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

// The picture puts each bucket's bar at its own place along the time axis,
// one bucket wide, and stacks classes without overlap.
func TestNightChartGeometry(t *testing.T) {
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	rows := []ledger.TimelineRow{{Bucket: 0, Class: "ok", Calls: 30}, {Bucket: 0, Class: "throttled", Calls: 30}, {Bucket: 3, Class: "ok", Calls: 15}}
	tl := operator.BuildTimeline(start, start.Add(4*time.Minute), time.Minute, rows)
	c := newNightChart(tl)
	require.Len(t, c.Bars, 3)
	bw := c.PlotW / 4
	for _, b := range c.Bars {
		t.Logf("%+v", b)
	}
	require.InDelta(t, nightLeft, c.Bars[0].X, 0.01)
	require.InDelta(t, nightLeft+3*bw, c.Bars[2].X, 0.01)
	require.InDelta(t, bw-0.5, c.Bars[2].W, 0.01)
	require.InDelta(t, c.CallsBottom, c.Bars[0].Y+c.Bars[0].H, 0.01, "ok at the bottom")
	require.InDelta(t, c.Bars[0].Y, c.Bars[1].Y+c.Bars[1].H, 0.01, "throttled stacked on it")
	require.InDelta(t, c.CallsTop, c.Bars[1].Y, 0.01, "the highest bucket reaches the top")
	require.InDelta(t, c.CallsH/4, c.Bars[2].H, 0.01, "a quarter of the highest rate")
}

// With a pace history the picture draws the pace and the limit over the
// night, bucket by bucket with gaps, instead of the lines of the pace now.
func TestNightChartPaceHistory(t *testing.T) {
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	rows := []ledger.TimelineRow{{Bucket: 0, Class: "ok", Calls: 60}}
	tl := operator.BuildTimeline(start, start.Add(4*time.Minute), time.Minute, rows)
	now := 2.0
	tl.PaceRatePerS = &now
	c := newNightChart(tl)
	require.NotNil(t, c.PaceY, "without history: the pace now")
	require.Empty(t, c.PacePath)

	limit := 2.0
	tl = operator.AttachPace(tl, []ledger.PacePoint{{At: start, RatePerS: 1, LimitPerS: &limit}, {At: start.Add(2 * time.Minute), RatePerS: 0.5}})
	c = newNightChart(tl)
	require.Nil(t, c.PaceY, "the history replaces the line of the pace now")
	bw := c.PlotW / 4
	y := func(rate float64) float64 { return c.CallsTop + c.CallsH - rate/2*c.CallsH } // the limit, 2/s, is the top
	want := []string{
		"M" + f1(nightLeft) + " " + f1(y(1)) + " H" + f1(nightLeft+bw),
		"M" + f1(nightLeft+2*bw) + " " + f1(y(0.5)) + " H" + f1(nightLeft+3*bw),
	}
	require.Equal(t, want[0]+" "+want[1], c.PacePath, "a gap where no pace was recorded")
	require.Equal(t, "M"+f1(nightLeft)+" "+f1(c.CallsTop)+" H"+f1(nightLeft+bw), c.LimitPath)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
