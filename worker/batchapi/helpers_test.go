package batchapi

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/testclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testKey is a canary: no error string may ever contain it.
const testKey = "sk-canary-7f3a9e-DO-NOT-LEAK"

var vendors = []string{"openai", "anthropic"}

type testBundle struct {
	vendor string
	fp     *fakeprovider.Server
	srv    *httptest.Server
	clock  *testclock.Clock
	client *Client
}

// setup serves sc (its clock injected, its key the canary) and returns a
// batch client of vendor pointed at it.
func setup(t *testing.T, vendor string, sc fakeprovider.Scenario) *testBundle {
	t.Helper()
	clk := testclock.New(time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC))
	sc.Now, sc.APIKey = clk.Now, testKey
	fp := fakeprovider.New(sc)
	srv := httptest.NewServer(fp)
	t.Cleanup(func() {
		_ = fp.Close()
		srv.Close()
	})
	b := &testBundle{vendor: vendor, fp: fp, srv: srv, clock: clk}
	b.client = b.newClient(t, testKey)
	return b
}

// newClient is a fresh Client on the bundle's server: what a restarted
// process would build.
func (b *testBundle) newClient(t *testing.T, key string) *Client {
	t.Helper()
	c, err := New(Options{Vendor: b.vendor, BaseURL: b.srv.URL + "/v1", APIKey: key, Timeout: 10 * time.Second, HTTPClient: b.srv.Client()})
	require.NoError(t, err)
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const jsonSystem = "You add fields to records. Answer with one JSON object."

func model(vendor string) string {
	if vendor == "anthropic" {
		return "claude-sonnet-4-5"
	}
	return "gpt-4o-mini"
}

// request is the synchronous request for record id; its idempotency key is
// the line's custom_id.
func request(vendor, id, extra string) provider.Request {
	r := provider.Request{Model: model(vendor), System: jsonSystem, Prompt: `Record: {"id":"` + id + `"}` + extra,
		MaxTokens: 256, JSON: true, RecordID: id}
	r.IdempotencyKey = provider.IdempotencyKey("b1", id, "enrich", provider.RequestHash(r))
	return r
}

func format(vendor string) provider.Format {
	f, _ := provider.FormatFor(vendor)
	return f
}

// line renders record id exactly as the synchronous call would send it.
func line(t *testing.T, vendor, id, extra string) Line {
	t.Helper()
	body, err := provider.RequestBody(format(vendor), request(vendor, id, extra))
	require.NoError(t, err)
	return Line{CustomID: request(vendor, id, extra).IdempotencyKey, Body: body}
}

func recordIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%02d", i)
	}
	return out
}

func linesFor(t *testing.T, vendor string, ids []string, extra func(id string) string) []Line {
	t.Helper()
	out := make([]Line, len(ids))
	for i, id := range ids {
		x := ""
		if extra != nil {
			x = extra(id)
		}
		out[i] = line(t, vendor, id, x)
	}
	return out
}

func customIDsOf(lines []Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.CustomID
	}
	return out
}

// submit uploads and creates, as the submitter does.
func (b *testBundle) submit(t *testing.T, ctx context.Context, c *Client, lines []Line, tag string) Batch {
	t.Helper()
	fileID, err := c.Upload(ctx, lines, tag)
	require.NoError(t, err)
	batch, err := c.Create(ctx, fileID, lines, tag)
	require.NoError(t, err)
	require.NotEmpty(t, batch.ID)
	return batch
}

// results reads every result, failing the test on any error.
func results(t *testing.T, ctx context.Context, c *Client, b Batch) []Result {
	t.Helper()
	var out []Result
	for r, err := range c.Results(ctx, b) {
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// syncNth runs n synchronous calls (records r00, r01, ...) against a fresh
// fake scripted with sc, each the request a batch line carries, and returns
// the n-th.
func syncNth(t *testing.T, vendor string, sc fakeprovider.Scenario, extra string, n int) provider.Result {
	t.Helper()
	sc.APIKey = testKey
	fp := fakeprovider.New(sc)
	srv := httptest.NewServer(fp)
	t.Cleanup(func() {
		_ = fp.Close()
		srv.Close()
	})
	c, err := provider.New(provider.Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: testKey, HTTPClient: srv.Client()})
	require.NoError(t, err)
	var res provider.Result
	for i := range n {
		res, err = c.Do(ctxT(t), request(vendor, fmt.Sprintf("r%02d", i), extra))
		require.NoError(t, err)
	}
	return res
}

func requireSameVerdict(t *testing.T, want, got classify.Observation) {
	t.Helper()
	w, g := classify.Classify(want), classify.Classify(got)
	require.Equal(t, w.Class, g.Class, "sync %+v batch %+v", w, g)
	require.Equal(t, w.Reason, g.Reason)
	require.Equal(t, w.Known, g.Known)
}
