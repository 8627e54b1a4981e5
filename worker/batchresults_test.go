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
