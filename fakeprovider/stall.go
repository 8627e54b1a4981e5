package fakeprovider

import (
	"context"
	"net/http"
	"strings"
)

// cutChunks is how many content chunks a cut, failed or stalled stream
// sends.
func (s Step) cutChunks() int {
	if s.Chunks == 0 {
		return ChunksDefault
	}
	return s.Chunks
}

// generated is how many content chunks the model produced before the call
// was cut (-1: the whole answer). Only a stream stops generating when it is
// cut: a cut non-streaming body was generated whole before it was sent.
func (d *decision) generated() int {
	if d.call == nil || !d.call.stream {
		return -1
	}
	switch d.action {
	case ActionCutStream, ActionStreamError, ActionStallStream:
		return d.step.cutChunks()
	}
	return -1
}

// generatedText is the part of an answer its first n content chunks carry.
func generatedText(text string, n int) string {
	parts := chunks(text)
	return strings.Join(parts[:min(n, len(parts))], "")
}

// stallStream sends the stream's head and n content chunks, then nothing,
// holding the connection open until the client leaves (counted in Hanging).
func (s *Server) stallStream(ctx context.Context, w http.ResponseWriter, d *decision, n int) {
	head, deltas, _ := d.vendor.stream(d.call, d.ans)
	frames := append(append([][]byte{}, head...), deltas[:min(n, len(deltas))]...)
	if !s.sendFrames(ctx, w, d, frames) {
		return
	}
	s.hang(ctx)
}

// stallBody is a stall on a non-streaming request: the status line and
// headers, then a body that never comes.
func (s *Server) stallBody(ctx context.Context, w http.ResponseWriter, d *decision) {
	d.vendor.headers(w.Header(), d.info)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	s.hang(ctx)
}
