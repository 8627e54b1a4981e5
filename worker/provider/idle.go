package provider

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// idleReader cancels a call when its stream goes quiet: every Read that
// returns bytes re-arms the timer, and when it fires the call's context is
// cancelled, which makes the pending Read fail and the stream end as cut.
// A timer rather than a deadline per Read because http.Response.Body has no
// read deadline of its own.
type idleReader struct {
	r     io.Reader
	d     time.Duration
	t     *time.Timer
	timed atomic.Bool
}

func newIdleReader(r io.Reader, d time.Duration, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, d: d}
	ir.t = time.AfterFunc(d, func() {
		ir.timed.Store(true)
		cancel()
	})
	return ir
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 && !ir.timed.Load() {
		ir.t.Reset(ir.d)
	}
	return n, err
}

// stop disarms the timer once the stream is read.
func (ir *idleReader) stop() { ir.t.Stop() }

// fired reports whether the idle timeout cut the stream.
func (ir *idleReader) fired() bool { return ir.timed.Load() }
