package worker_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// slowUpload holds the first OpenAI file upload until release is closed,
// as a large file on a slow link would: the process that sent it outlives
// its lease on the provider batch row.
type slowUpload struct {
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (s *slowUpload) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/files") {
		first := false
		s.once.Do(func() { first = true })
		if first {
			close(s.held)
			select {
			case <-s.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A process whose upload outlasts its lease on the provider batch row: a
// second process claims the row, finds no batch, and submits the lines
// itself. When the first one's upload returns at last it must not write the
// row (it would set it back to uploaded) nor create a second provider batch
// of the same lines: each line is billed once.
func TestBatchRowLeaseLostDuringUploadIsNotSubmittedTwice(t *testing.T) {
	t.Parallel()
	// The first process renews its lease every third of it, in real
	// time, while its upload hangs: with a 60 s timeout (a 3 min lease)
	// no renewal comes within the test's waits, so the second process's
	// claim after the clock jump is not raced by one (with 20 s, a renewal
	// 20 s in, after the jump, held the row past the wait once in CI).
	b, clock := setupBatch(t, fakeprovider.Scenario{}, "batch", tweaks{timeout: "60s"})
	slow := &slowUpload{held: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(slow.release) }) }
	fast := b.opts.HTTPClient
	const n = 20
	b.startStalled(t, slow, slow.held, n, "the first process's upload")
	// The lease (3 × the 60 s timeout) runs out while the upload hangs.
	clock.Advance(4 * time.Minute)
	b.opts.HTTPClient = fast
	b.start(t)
	// Registered after both processes: it runs before their Stops, so a
	// failing wait does not leave the first process's upload hanging.
	t.Cleanup(release)
	eventually(t, 30*time.Second, "the second process submits the row", func() bool {
		return b.providerBatches(t)["submitted"] == 1 && b.fake.Stats().Batches.Created == 1
	})
	release()

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, n, st.Completed)
	stats := b.fake.Stats()
	require.Equal(t, 1, stats.Batches.Created, "the process that lost its lease created no second batch")
	require.Equal(t, n, stats.Batches.Lines)
	b.requireBilledOnce(t)
}
