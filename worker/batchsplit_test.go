package worker_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// splitHolder refuses the first batch create as a whole (an Anthropic 400
// naming no line, so the submitter splits the batch in halves) and holds
// the second create until release is closed.
type splitHolder struct {
	mu      sync.Mutex
	creates int
	held    chan struct{}
	release chan struct{}
}

func (s *splitHolder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/batches") {
		s.mu.Lock()
		s.creates++
		n := s.creates
		s.mu.Unlock()
		switch n {
		case 1:
			body := `{"type":"error","error":{"type":"invalid_request_error","message":"requests: too large for this batch"}}`
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
		case 2:
			close(s.held)
			<-s.release
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The halves of a refused batch are sent without a search first by the
// process that split it, which knows it never sent them. Another process
// may send one meanwhile and lose the create's answer: the splitting
// process must then look for it as for any intent row, not create it a
// second time.
func TestBatchSplitHalfSentByAnotherProcessIsLookedForFirst(t *testing.T) {
	t.Parallel()
	sc := fakeprovider.Scenario{Batch: fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)}}
	b, clock := setupBatch(t, sc, "batch", tweaks{vendor: "anthropic", timeout: "20s"})
	hold := &splitHolder{held: make(chan struct{}), release: make(chan struct{})}
	const n = 10
	// The n lines one provider batch, however slowly a loaded machine's
	// jobs write them (startStalled's oneGather): split by the gather
	// window, a smaller first batch was refused instead, and its halves,
	// or a batch of the rest, were what the processes sent (each half
	// created once: expected 2, actual 3; or a 30 s wait for a half that
	// never came).
	b.startStalled(t, hold, hold.held, n, "the first process's half")
	// A second process sends the other half; its create's answer is lost.
	lossy := &lossyCreate{}
	b.opts.HTTPClient = &http.Client{Transport: lossy}
	other := b.start(t)
	eventually(t, 30*time.Second, "the other process sent a half", func() bool {
		return lossy.hasLost()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, other.Stop(ctx))
	polls := b.fake.Stats().Batches.Polls
	close(hold.release)
	eventually(t, 30*time.Second, "the first process took the half over", func() bool {
		s := b.fake.Stats().Batches
		return s.Created > 2 || s.Polls >= polls+2
	})
	clock.Advance(2 * time.Hour)
	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, 2, stats.Batches.Created, "each half created once")
	require.Equal(t, n, stats.Batches.Lines)
	b.requireBilledOnce(t)
}
