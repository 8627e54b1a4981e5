package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDeadline(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	evening := time.Date(2026, 12, 1, 22, 0, 0, 0, paris)
	morning := time.Date(2026, 12, 1, 7, 0, 0, 0, paris)

	for _, tc := range []struct {
		in       string
		enqueued time.Time
		want     time.Time
		str      string
	}{
		{"06:00", evening, time.Date(2026, 12, 2, 6, 0, 0, 0, paris), "06:00"},
		{"06:00", morning, time.Date(2026, 12, 2, 6, 0, 0, 0, paris), "06:00"},
		{"23:30", morning, time.Date(2026, 12, 1, 23, 30, 0, 0, paris), "23:30"},
		{"6:05", evening, time.Date(2026, 12, 2, 6, 5, 0, 0, paris), "06:05"},
		{"00:00", evening, time.Date(2026, 12, 2, 0, 0, 0, 0, paris), "00:00"},
		// The clock reading the enqueue moment itself is tomorrow's.
		{"22:00", evening, time.Date(2026, 12, 2, 22, 0, 0, 0, paris), "22:00"},
		{"8h", evening, evening.Add(8 * time.Hour), "8h0m0s"},
		{"90m", morning, morning.Add(90 * time.Minute), "1h30m0s"},
		{"1d", morning, morning.Add(24 * time.Hour), "24h0m0s"},
	} {
		d, err := ParseDeadline(tc.in)
		require.NoError(t, err, tc.in)
		require.False(t, d.IsZero(), tc.in)
		require.True(t, tc.want.Equal(d.At(tc.enqueued)), "%s from %s: got %s, want %s", tc.in, tc.enqueued, d.At(tc.enqueued), tc.want)
		require.Equal(t, tc.str, d.String(), tc.in)
	}

	// Across the spring daylight-saving change (Paris, 29 March 2026): the
	// next 06:00 is six wall-clock hours away but only five real ones.
	d, err := ParseDeadline("06:00")
	require.NoError(t, err)
	before := time.Date(2026, 3, 29, 0, 0, 0, 0, paris)
	require.Equal(t, 5*time.Hour, d.At(before).Sub(before))

	none, err := ParseDeadline("")
	require.NoError(t, err)
	require.True(t, none.IsZero())
	require.True(t, none.At(evening).IsZero())
	require.Equal(t, "", none.String())

	for in, want := range map[string]string{
		"24:00":    "not a clock time",
		"06:60":    "not a clock time",
		"6":        "not a clock time",
		"6am":      "not a clock time",
		"06:00:00": "not a clock time",
		"soon":     "not a clock time",
		"0s":       "must be positive",
		"-1h":      "must be positive",
		"0d":       "must be positive",
	} {
		_, err := ParseDeadline(in)
		require.ErrorContains(t, err, want, in)
	}
}

func TestPipelineDeadline(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	p, err := cfg.Pipeline("enrich")
	require.NoError(t, err)
	require.True(t, p.Deadline.IsZero(), "none by default")

	for in, want := range map[string]string{`"06:00"`: "06:00", `"8h"`: "8h0m0s"} {
		cfg, err := Parse([]byte(minimal+"deadline = "+in+"\n"), "triage.toml")
		require.NoError(t, err, in)
		p, err := cfg.Pipeline("enrich")
		require.NoError(t, err)
		require.Equal(t, want, p.Deadline.String(), in)
	}

	for in, want := range map[string]string{
		`"25:00"`:    `triage.toml: pipelines[0] "enrich": deadline "25:00": not a clock time like "06:00"`,
		`"tomorrow"`: `triage.toml: pipelines[0] "enrich": deadline "tomorrow": not a clock time like "06:00" (00:00 to 23:59, local time) nor a duration like "8h"`,
		`"-8h"`:      `triage.toml: pipelines[0] "enrich": deadline "-8h": must be positive`,
	} {
		_, err := Parse([]byte(minimal+"deadline = "+in+"\n"), "triage.toml")
		require.ErrorContains(t, err, want, in)
	}
	_, err = Parse([]byte(minimal+"deadline = 6\n"), "triage.toml")
	require.ErrorContains(t, err, "deadline", "a number is not a deadline")
}
