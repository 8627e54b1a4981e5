package batchapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/provider"
)

const wrongKey = "sk-canary-wrong-4b1d-DO-NOT-LEAK"

// syncAt is one synchronous call to baseURL with key.
func syncAt(t *testing.T, vendor, baseURL, key string, timeout time.Duration) provider.Result {
	t.Helper()
	c, err := provider.New(provider.Options{Vendor: vendor, BaseURL: baseURL, APIKey: key, Timeout: timeout})
	require.NoError(t, err)
	res, err := c.Do(ctxT(t), request(vendor, "r00", ""))
	require.NoError(t, err)
	return res
}

// everyCall runs each of the client's calls once and returns their errors
// by operation.
func everyCall(ctx context.Context, c *Client, lines []Line) map[string]error {
	errs := map[string]error{}
	if c.Format() == provider.FormatOpenAI {
		_, errs["upload"] = c.Upload(ctx, lines, "row-1")
	}
	_, errs["create"] = c.Create(ctx, "file-abc", lines, "row-1")
	_, errs["get"] = c.Get(ctx, "batch_abc")
	_, errs["cancel"] = c.Cancel(ctx, "batch_abc")
	_, _, errs["find"] = c.Find(ctx, "row-1", time.Time{}, customIDsOf(lines), nil)
	b := Batch{ID: "msgbatch_abc", Ended: true, OutputFileID: "file-out"}
	for _, err := range c.Results(ctx, b) {
		errs["results"] = err
		break
	}
	return errs
}

// requireCallErrors checks that every call failed with a *CallError naming
// its operation, classified as the synchronous call was, and that no error
// string carries a key or the body.
func requireCallErrors(t *testing.T, errs map[string]error, sync provider.Result) {
	t.Helper()
	require.NotEmpty(t, errs)
	for op, err := range errs {
		var ce *CallError
		require.ErrorAs(t, err, &ce, op)
		require.Equal(t, op, ce.Op)
		require.Equal(t, sync.Observation.Phase, ce.Res.Observation.Phase, op)
		require.Equal(t, sync.Observation.Status, ce.Res.Observation.Status, op)
		requireSameVerdict(t, sync.Observation, ce.Res.Observation)
		msg := err.Error()
		require.NotContains(t, msg, testKey, op)
		require.NotContains(t, msg, wrongKey, op)
		require.NotContains(t, msg, "sk-canary", op)
		if body := strings.TrimSpace(sync.Observation.Body); body != "" {
			require.NotContains(t, msg, body, op)
		}
		if sync.Observation.Phase == classify.PhaseResponse {
			require.Contains(t, msg, "status "+strconv.Itoa(sync.Observation.Status), op)
		}
	}
}

func TestWrongKeyIsACallError(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, vendor, fakeprovider.Scenario{})
			sync := syncAt(t, vendor, b.srv.URL+"/v1", wrongKey, 5*time.Second)
			require.Equal(t, 401, sync.Observation.Status)
			errs := everyCall(ctxT(t), b.newClient(t, wrongKey), linesFor(t, vendor, recordIDs(2), nil))
			requireCallErrors(t, errs, sync)
			var ce *CallError
			require.ErrorAs(t, errs["get"], &ce)
			require.Contains(t, ce.Res.Observation.Body, "error", "the body is evidence in the Observation")
		})
	}
}

// replay answers every request with what the synchronous call got.
func replay(sync provider.Result) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range sync.Observation.Headers {
			if k != "content-length" && k != "date" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(sync.Observation.Status)
		_, _ = io.WriteString(w, sync.Observation.Body)
	}
}

// A provider that fails the management calls (500, overload) fails them as
// it fails a synchronous call: the same status, body and verdict.
func TestServerErrorsClassifyLikeSyncCalls(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		for _, a := range []fakeprovider.Action{fakeprovider.ActionServerError, fakeprovider.ActionOverloaded,
			fakeprovider.ActionRateLimit, fakeprovider.ActionExhausted} {
			t.Run(vendor+"/"+string(a), func(t *testing.T) {
				t.Parallel()
				sync := syncNth(t, vendor, fakeprovider.Scenario{Script: []fakeprovider.Step{{Action: a}}}, "", 1)
				require.GreaterOrEqual(t, sync.Observation.Status, 400)
				srv := httptest.NewServer(replay(sync))
				t.Cleanup(srv.Close)
				c, err := New(Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: testKey, HTTPClient: srv.Client()})
				require.NoError(t, err)
				errs := everyCall(ctxT(t), c, linesFor(t, vendor, recordIDs(2), nil))
				requireCallErrors(t, errs, sync)
				if a == fakeprovider.ActionRateLimit {
					var ce *CallError
					require.ErrorAs(t, errs["create"], &ce)
					require.Equal(t, sync.RateLimit, ce.Res.RateLimit, "rate-limit headers are read as Do reads them")
				}
			})
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String() + "/v1"
	require.NoError(t, ln.Close())
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			sync := syncAt(t, vendor, base, testKey, 5*time.Second)
			require.Equal(t, classify.PhaseNotSent, sync.Observation.Phase)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			c, err := New(Options{Vendor: vendor, BaseURL: base, APIKey: testKey, HTTPClient: &http.Client{Transport: tr}})
			require.NoError(t, err)
			errs := everyCall(ctxT(t), c, linesFor(t, vendor, recordIDs(2), nil))
			requireCallErrors(t, errs, sync)
			var ce *CallError
			require.ErrorAs(t, errs["get"], &ce)
			require.Contains(t, ce.Res.NetworkError, "refused")
			require.Contains(t, errs["get"].Error(), "not_sent")
		})
	}
}

// A call the provider took and never answered may have created the batch:
// sent_no_response, ambiguous, like a synchronous call that hangs.
func TestNoAnswerIsAmbiguous(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			read := make(chan struct{}, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				read <- struct{}{}
				<-r.Context().Done() // never answers; the client's timeout ends it
			}))
			t.Cleanup(srv.Close)
			sync := syncAt(t, vendor, srv.URL+"/v1", testKey, 50*time.Millisecond)
			require.Equal(t, classify.PhaseSentNoResponse, sync.Observation.Phase)
			<-read
			c, err := New(Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: testKey, Timeout: 50 * time.Millisecond, HTTPClient: srv.Client()})
			require.NoError(t, err)
			_, err = c.Create(ctxT(t), "file-abc", linesFor(t, vendor, recordIDs(2), nil), "row-1")
			requireCallErrors(t, map[string]error{"create": err}, sync)
			<-read
			require.Equal(t, classify.Ambiguous, classify.Classify(err.(*CallError).Res.Observation).Class)
			require.Contains(t, err.Error(), "no answer within the key's timeout")

			// A download that goes silent is cut by the same timeout.
			for _, err := range c.Results(ctxT(t), Batch{ID: "msgbatch_x", Ended: true, OutputFileID: "file-x"}) {
				var ce *CallError
				require.ErrorAs(t, err, &ce)
				require.Contains(t, err.Error(), "no answer within the key's timeout")
			}
			<-read
		})
	}
}

// A result file that breaks off midway yields what arrived, then the error.
func TestResultsCutMidway(t *testing.T) {
	t.Parallel()
	first := `{"custom_id":"k1","result":{"type":"expired"}}` + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Options{Vendor: "anthropic", BaseURL: srv.URL + "/v1", APIKey: testKey, HTTPClient: srv.Client()})
	require.NoError(t, err)
	var got []Result
	var last error
	for r, err := range c.Results(ctxT(t), Batch{ID: "msgbatch_x", Ended: true}) {
		if err != nil {
			last = err
			continue
		}
		got = append(got, r)
	}
	require.Equal(t, []Result{{CustomID: "k1", NotRun: NotRunExpired}}, got)
	var ce *CallError
	require.ErrorAs(t, last, &ce)
	require.Equal(t, "results", ce.Op)
	require.Equal(t, classify.PhaseSentNoResponse, ce.Res.Observation.Phase)
}

// A 2xx that is not the answer expected (a proxy's page) is a CallError
// saying so, not a zero Batch.
func TestMalformedAnswer(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "<html>maintenance</html>")
			}))
			t.Cleanup(srv.Close)
			c, err := New(Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: testKey, HTTPClient: srv.Client()})
			require.NoError(t, err)
			_, err = c.Get(ctxT(t), "batch_abc")
			var ce *CallError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, 200, ce.Res.Observation.Status)
			require.NotEmpty(t, ce.Res.Malformed)
			require.Equal(t, "<html>maintenance</html>", ce.Res.Observation.Body)
			require.NotContains(t, err.Error(), "maintenance")
			require.True(t, errors.As(err, &ce))
		})
	}
}

// An unreadable result line is reported and skipped; the lines after it
// still come.
func TestMalformedResultLines(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"anthropic": "not json\n" +
			`{"custom_id":"k1","result":{"type":"something_new"}}` + "\n" +
			`{"custom_id":"k2","result":{"type":"canceled"}}` + "\n",
		"openai": "not json\n" +
			`{"custom_id":"k1","response":null,"error":null}` + "\n" +
			`{"custom_id":"k2","response":null,"error":{"code":"batch_expired","message":"..."}}` + "\n",
	}
	for vendor, file := range files {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, file)
			}))
			t.Cleanup(srv.Close)
			c, err := New(Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: testKey, HTTPClient: srv.Client()})
			require.NoError(t, err)
			var got []Result
			bad := 0
			for r, err := range c.Results(ctxT(t), Batch{ID: "msgbatch_x", Ended: true, OutputFileID: "file-x"}) {
				if err != nil {
					require.ErrorIs(t, err, ErrMalformedResult)
					require.NotContains(t, err.Error(), "not json", "the line itself stays out of the error")
					bad++
					continue
				}
				got = append(got, r)
			}
			require.Equal(t, 2, bad)
			require.Len(t, got, 1)
			require.Equal(t, "k2", got[0].CustomID)
			require.False(t, got[0].Ran)
		})
	}
}

func TestNewChecksOptions(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"no URL":      {Vendor: "openai", APIKey: testKey},
		"not http":    {Vendor: "openai", BaseURL: "ftp://x/v1", APIKey: testKey},
		"no key":      {Vendor: "openai", BaseURL: "https://api.openai.com/v1"},
		"newline key": {Vendor: "anthropic", BaseURL: "https://api.anthropic.com/v1", APIKey: testKey + "\n"},
		"negative":    {Vendor: "anthropic", BaseURL: "https://api.anthropic.com/v1", APIKey: testKey, Timeout: -1},
	} {
		_, err := New(o)
		require.ErrorIs(t, err, provider.ErrInvalidOptions, name)
		require.NotContains(t, err.Error(), testKey, name)
	}
	c, err := New(Options{Vendor: "openai", BaseURL: "https://user:pw@api.openai.com/v1?x=1", APIKey: testKey})
	require.NoError(t, err)
	require.Equal(t, "batchapi.Client(openai https://api.openai.com/v1)", c.String())
	require.Equal(t, provider.FormatOpenAI, c.Format())
}
