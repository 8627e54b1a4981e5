package provider_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
)

// TestStreamIdleTimeout: a stream that stops sending is cut by the idle
// timeout, long before the call's own timeout, with what it sent kept; a
// stream whose chunks keep coming is not cut however long it takes in all.
func TestStreamIdleTimeout(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			fp := fakeprovider.New(fakeprovider.Scenario{APIKey: fakeKey, Script: []fakeprovider.Step{
				{Action: fakeprovider.ActionStallStream, Chunks: 2},
				{Action: fakeprovider.ActionOK},
			}})
			srv := httptest.NewServer(fp)
			t.Cleanup(srv.Close)
			t.Cleanup(func() { _ = fp.Close() })
			c, err := provider.New(provider.Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: time.Minute})
			require.NoError(t, err)
			r := provider.Request{Model: "m", System: "Answer with one JSON object.", Prompt: `Record: {"id":"r1"}`,
				MaxTokens: 64, Stream: true, IdleTimeout: 200 * time.Millisecond, RecordID: "r1", IdempotencyKey: "k1"}

			res, err := c.Do(context.Background(), r)
			require.NoError(t, err)
			require.True(t, res.IdleTimedOut, "cut by the idle timeout, not the call's minute")
			require.Equal(t, classify.PhaseStream, res.Observation.Phase)
			require.Equal(t, fakeprovider.ExpectedAnswer(r.Prompt, true)[:24], res.Content, "two chunks arrived before the stall")
			require.Equal(t, classify.Ambiguous, classify.Classify(res.Observation).Class)

			// The next stream is whole: the idle timer is re-armed by every
			// chunk and stopped at the end.
			r.IdempotencyKey = "k2"
			res, err = c.Do(context.Background(), r)
			require.NoError(t, err)
			require.False(t, res.IdleTimedOut)
			require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
			require.Equal(t, fakeprovider.ExpectedAnswer(r.Prompt, true), res.Content)
			require.Equal(t, 2, fp.Stats().BilledCalls)
		})
	}
}

// TestStreamIdleTimeoutIsPerChunk: a slow stream whose whole takes several
// idle timeouts, with every gap shorter than one, is not cut.
func TestStreamIdleTimeoutIsPerChunk(t *testing.T) {
	t.Parallel()
	const chunkLatency = 100 * time.Millisecond
	fp := fakeprovider.New(fakeprovider.Scenario{APIKey: fakeKey, ChunkLatency: fakeprovider.Duration(chunkLatency)})
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = fp.Close() })
	c, err := provider.New(provider.Options{Vendor: "openai", BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: time.Minute})
	require.NoError(t, err)
	r := provider.Request{Model: "m", System: "Answer with one JSON object.", Prompt: `Record: {"id":"r1"}`,
		MaxTokens: 64, Stream: true, IdleTimeout: 400 * time.Millisecond, RecordID: "r1", IdempotencyKey: "k1"}
	res, err := c.Do(context.Background(), r)
	require.NoError(t, err)
	require.False(t, res.IdleTimedOut)
	require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
	// The fake waits ChunkLatency between frames, so the whole stream lasted
	// longer than one idle timeout: counted in frames, not on the wall clock.
	gaps := strings.Count(res.Observation.Body, "data:") - 1
	require.Greater(t, time.Duration(gaps)*chunkLatency, r.IdleTimeout)
	require.Equal(t, fakeprovider.ExpectedAnswer(r.Prompt, true), res.Content)
}

// TestSteadyStreamOutlivesTheCallTimeout: a stream that keeps delivering
// is not cut by the client's Timeout, which bounds the wait for the
// stream to start; the idle timeout and the ceiling (StreamMax) decide
// once it has (issue 23). The whole stream takes longer than Timeout.
func TestSteadyStreamOutlivesTheCallTimeout(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			const chunkLatency = 100 * time.Millisecond
			fp := fakeprovider.New(fakeprovider.Scenario{APIKey: fakeKey, ChunkLatency: fakeprovider.Duration(chunkLatency)})
			srv := httptest.NewServer(fp)
			t.Cleanup(srv.Close)
			t.Cleanup(func() { _ = fp.Close() })
			const timeout = 300 * time.Millisecond
			c, err := provider.New(provider.Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: timeout})
			require.NoError(t, err)
			r := provider.Request{Model: "m", System: "Answer with one JSON object.", Prompt: `Record: {"id":"r1"}`,
				MaxTokens: 64, Stream: true, IdleTimeout: time.Second, StreamMax: time.Minute, RecordID: "r1", IdempotencyKey: "k1"}
			res, err := c.Do(context.Background(), r)
			require.NoError(t, err)
			require.Equal(t, classify.PhaseResponse, res.Observation.Phase, "not cut: %s", res.NetworkError)
			require.False(t, res.IdleTimedOut)
			require.Equal(t, fakeprovider.ExpectedAnswer(r.Prompt, true), res.Content)
			gaps := strings.Count(res.Observation.Body, "data:") - 1
			if vendor == "anthropic" {
				gaps = strings.Count(res.Observation.Body, "event:") - 1
			}
			require.Greater(t, time.Duration(gaps)*chunkLatency, timeout, "the stream lasted longer than the call timeout")
		})
	}
}

// TestStreamCeilingCutsASteadyStream: a stream still delivering at its
// ceiling (StreamMax) is cut there, ambiguous with what it sent kept.
func TestStreamCeilingCutsASteadyStream(t *testing.T) {
	t.Parallel()
	const chunkLatency = 100 * time.Millisecond
	fp := fakeprovider.New(fakeprovider.Scenario{APIKey: fakeKey, ChunkLatency: fakeprovider.Duration(chunkLatency)})
	srv := httptest.NewServer(fp)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = fp.Close() })
	c, err := provider.New(provider.Options{Vendor: "openai", BaseURL: srv.URL + "/v1", APIKey: fakeKey, Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	r := provider.Request{Model: "m", System: "Answer with one JSON object.", Prompt: `Record: {"id":"r1"}`,
		MaxTokens: 64, Stream: true, IdleTimeout: time.Second, StreamMax: 350 * time.Millisecond, RecordID: "r1", IdempotencyKey: "k1"}
	res, err := c.Do(context.Background(), r)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseStream, res.Observation.Phase, "cut mid-stream")
	require.False(t, res.IdleTimedOut, "cut by the ceiling, not by silence")
	require.NotEqual(t, fakeprovider.ExpectedAnswer(r.Prompt, true), res.Content)
	require.Equal(t, classify.Ambiguous, classify.Classify(res.Observation).Class)
}
