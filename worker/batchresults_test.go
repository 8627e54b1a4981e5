package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
)

// garbledResults cuts the first line of the first results file short, as
// a damaged download or a result shape newer than triage would: the line's
// custom_id cannot be read, though the provider ran (and billed) it.
type garbledResults struct {
	mu     sync.Mutex
	custom string // the custom_id of the line made unreadable
}

func (g *garbledResults) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/content") || res.StatusCode != http.StatusOK {
		return res, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.custom != "" {
		return res, nil
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	first, rest, _ := bytes.Cut(body, []byte("\n"))
	var ln struct {
		CustomID string `json:"custom_id"`
	}
	if jsonErr := json.Unmarshal(first, &ln); jsonErr != nil || ln.CustomID == "" {
		res.Body = io.NopCloser(bytes.NewReader(body))
		return res, nil
	}
	g.custom = ln.CustomID
	body = append(append(first[:len(first)/2:len(first)/2], '\n'), rest...)
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Del("Content-Length")
	return res, nil
}

// A result line triage cannot read may be a line that ran and was billed:
// it is not "not run" (sent again, billed twice, the first bill missing
// from the ledger) but an answer lost after the send, as a synchronous
// call's: possibly billed, and with ambiguous_retries = 0 dead-lettered
// rather than sent again.
func TestBatchUnreadableResultLineIsPossiblyBilledNotResent(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{extraPipeline: "ambiguous_retries = 0\n"})
	g := &garbledResults{}
	b.opts.HTTPClient = &http.Client{Transport: g}
	const n = 10
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	st := b.waitSettled(t, "b1", 30*time.Second)
	g.mu.Lock()
	custom := g.custom
	g.mu.Unlock()
	require.NotEmpty(t, custom, "a result line was made unreadable")
	require.Equal(t, n-1, st.Completed)
	stats := b.fake.Stats()
	require.Zero(t, stats.DoubleBilledRecords, "nothing billed twice")
	require.Equal(t, 1, stats.ByRecord[custom].Billed, "the unreadable line ran once and was not sent again")
	require.Equal(t, n, stats.Batches.Lines, "no line sent in a second batch")
	dls := b.deadLetters(t, "b1")
	require.Len(t, dls, 1)
	require.Equal(t, "ambiguous_retries_exhausted", dls[0].Reason)
	var status string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT status FROM triage_attempt WHERE idempotency_key = $1`, custom).Scan(&status))
	require.Equal(t, string(ledger.AttemptPossiblyBilled), status, "its cost is unknown, not $0")
}

// Anthropic batches are found after a lost create answer by their
// custom_ids. A batch cancelled before any line ran holds the very same
// custom_ids as the batch its requeued lines go into next: when that
// create's answer is lost, the search finds the cancelled batch (ended)
// while the new one runs. It must not be taken for it (the unique index on
// the provider batch id refuses the record); the new batch is found once
// it ends and its lines are collected, each billed once.
func TestBatchIntentRowIsNotMatchedWithAnEarlierBatchOfTheSameLines(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	// A short timeout, so a short lease: a refused record is tried again
	// once the lease runs out.
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic", timeout: "1s"})
	lossy := &lossyCreate{nth: 2}
	b.opts.HTTPClient = &http.Client{Transport: lossy}
	const n = 10
	b.oneGather(n, 2*time.Second)
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	eventually(t, 30*time.Second, "the provider batch is submitted", func() bool { return b.providerBatches(t)["submitted"] == 1 })
	_, err := ledger.RequestProviderCancel(context.Background(), b.db.Pool, "b1")
	require.NoError(t, err)
	eventually(t, 30*time.Second, "cancelled, and its lines sent again", func() bool {
		return lossy.hasLost()
	})
	require.Equal(t, n, b.fake.Stats().Batches.Canceled, "no line ran in the cancelled batch")
	// The search runs while the new batch is still in progress: the
	// cancelled one is the only ended candidate with these custom_ids.
	polls := b.fake.Stats().Batches.Polls
	eventually(t, 30*time.Second, "the submitter looks for the lost batch", func() bool { return b.fake.Stats().Batches.Polls >= polls+3 })
	require.Equal(t, 2, b.fake.Stats().Batches.Created)
	require.Equal(t, 1, b.providerBatches(t)["intent"], "not recorded as the cancelled batch")
	clock.Advance(2 * time.Hour)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, 2, stats.Batches.Created, "the lost create was found, not sent a third time")
	require.Equal(t, 2, b.providerBatches(t)["collected"])
	b.requireBilledOnce(t)
}

// cutResults cuts the first results download after half its lines, as a
// connection reset (or a process killed) midway through would.
type cutResults struct {
	mu  sync.Mutex
	cut int // lines delivered before the cut
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func (c *cutResults) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/content") || res.StatusCode != http.StatusOK {
		return res, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut != 0 {
		return res, nil
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(body, []byte("\n"))
	c.cut = len(lines) / 2
	res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(bytes.Join(lines[:c.cut], nil)), failingReader{}))
	res.ContentLength = -1
	res.Header.Del("Content-Length")
	return res, nil
}

// A collection cut midway (half the answers stored, their jobs applying
// them) is resumed by the next poll: the lines already answered are not
// answered again, the rest are, and every line is billed once.
func TestBatchCollectionCutMidwayIsResumed(t *testing.T) {
	t.Parallel()
	b, _ := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{})
	cut := &cutResults{}
	b.opts.HTTPClient = &http.Client{Transport: cut}
	b.opts.Batch.Gather = time.Hour
	const n = 20
	b.enqueue(t, "b1", records(n, nil))
	b.start(t)
	b.sendTogether(t, n)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	cut.mu.Lock()
	require.Positive(t, cut.cut, "the first download was cut")
	cut.mu.Unlock()
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.Created)
	require.Equal(t, n, stats.Batches.Lines)
	require.Equal(t, 1, b.providerBatches(t)["collected"])
	b.requireBilledOnce(t)
	var attempts int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM triage_attempt`).Scan(&attempts))
	require.Equal(t, n, attempts, "one attempt per line: none answered twice")
}
