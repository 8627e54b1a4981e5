package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummaryHandlerHoldsBackRepeats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	h := newSummaryHandler(slog.NewTextHandler(&buf, nil), time.Minute)
	log := slog.New(h)
	for range 50 {
		log.Error("producer: Error fetching jobs", "err", "dial error")
	}
	log.Error("key exhausted", "alert", true)
	log.Error("key exhausted", "alert", true)
	require.Equal(t, 1, strings.Count(buf.String(), "Error fetching jobs"), buf.String())
	require.Equal(t, 2, strings.Count(buf.String(), "key exhausted"), "alerts always pass")
	require.Equal(t, "49 repeated log events held back (each message prints at most once per 1m0s)", h.flush())
	require.Empty(t, h.flush())
}

func TestOutageBacksOffAndGivesUp(t *testing.T) {
	t.Parallel()
	o := outage{limit: 10 * time.Second}
	t0 := time.Now()
	w1, first, over := o.failed(t0)
	require.True(t, first)
	require.False(t, over)
	require.LessOrEqual(t, w1, dbRetryFirst)
	_, first, _ = o.failed(t0.Add(time.Second))
	require.False(t, first, "one notice per outage")
	_, _, over = o.failed(t0.Add(10 * time.Second))
	require.True(t, over)
	require.Equal(t, 11*time.Second, o.reached(t0.Add(11*time.Second)))
	require.Zero(t, o.reached(t0.Add(12*time.Second)))
}

// `triage run` writes one log format on stderr: the web window's errors
// (--ui-addr) are JSON like the worker's when stderr is not a terminal, not
// logfmt lines mixed into the JSON stream.
func TestRunUILogsInTheRunsFormat(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	runUILogger(&buf).Error("console: request failed", "path", "/batches/b1")
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "not JSON: %s", buf.String())
	require.Equal(t, "console: request failed", line["msg"])
}
