package fakeprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The Anthropic Message Batches API: create with the requests inline (POST
// /v1/messages/batches), poll (GET /v1/messages/batches/{id}), cancel, and
// read the results as JSONL once processing_status is "ended". Shapes follow
// anthropic-sdk-go's messagebatch.go and Anthropic's API reference.

type anthropicBatchWire struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	ProcessingStatus string `json:"processing_status"`
	RequestCounts    struct {
		Processing int `json:"processing"`
		Succeeded  int `json:"succeeded"`
		Errored    int `json:"errored"`
		Canceled   int `json:"canceled"`
		Expired    int `json:"expired"`
	} `json:"request_counts"`
	EndedAt           *string `json:"ended_at"`
	CreatedAt         string  `json:"created_at"`
	ExpiresAt         string  `json:"expires_at"`
	ArchivedAt        *string `json:"archived_at"`
	CancelInitiatedAt *string `json:"cancel_initiated_at"`
	ResultsURL        *string `json:"results_url"`
}

// rfc3339 is the API's timestamp form, with microseconds.
func rfc3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := rfc3339(t)
	return &s
}

func anthropicStatus(st string) string {
	switch st {
	case stCancelling:
		return "canceling"
	case stCompleted, stExpired, stCancelled:
		return "ended"
	}
	return "in_progress"
}

// anthropicResultsKeptFor: "Batch results are available for 29 days after
// creation. After that, you may still view the Batch, but its results will no
// longer be available for download." (Anthropic batch processing guide)
const anthropicResultsKeptFor = 29 * 24 * time.Hour

func (b *batchJob) archived(now time.Time) bool {
	return !now.Before(b.created.Add(anthropicResultsKeptFor))
}

func (b *batchJob) anthropicObject(now time.Time) []byte {
	o := anthropicBatchWire{ID: b.id, Type: "message_batch", ProcessingStatus: anthropicStatus(b.status),
		CreatedAt: rfc3339(b.created), ExpiresAt: rfc3339(b.expiresAt()),
		CancelInitiatedAt: optTime(b.cancellingAt)}
	if b.archived(now) {
		o.ArchivedAt = optTime(b.created.Add(anthropicResultsKeptFor))
	}
	if b.terminal() {
		// The other counts stay zero until the whole batch has ended.
		o.RequestCounts.Succeeded, o.RequestCounts.Errored = b.succeeded, b.errored
		o.RequestCounts.Canceled, o.RequestCounts.Expired = b.canceled, b.expired
		o.EndedAt = optTime(b.endedAt)
		u := "http://" + b.host + "/v1/messages/batches/" + b.id + "/results"
		o.ResultsURL = &u
	} else {
		o.RequestCounts.Processing = len(b.lines)
	}
	return marshal(o, "")
}

func (s *Server) serveAnthropicBatchCreate(w http.ResponseWriter, r *http.Request) {
	v := anthropic{}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, AnthropicBatchMaxBytes))
	s.mu.Lock()
	defer s.mu.Unlock()
	e, rej := s.batchRequestLocked(v, r)
	var tooBig *http.MaxBytesError
	switch {
	case rej != nil:
		writeReply(w, rej)
		return
	case errors.As(err, &tooBig):
		writeReply(w, v.errReply(e, http.StatusRequestEntityTooLarge, "request_too_large", "Request exceeds the maximum allowed number of bytes."))
		return
	case err != nil:
		return // the client is gone
	}
	bad := func(msg string) {
		s.stats.Batches.CreatesRefused++
		writeReply(w, v.errReply(e, http.StatusBadRequest, "invalid_request_error", msg))
	}
	var req struct {
		Requests *[]struct {
			CustomID *string         `json:"custom_id"`
			Params   json.RawMessage `json:"params"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		bad("There was an issue with the format or content of your request. The request body is not valid JSON.")
		return
	}
	limit := s.sc.Batch.MaxRequests
	if limit == 0 {
		limit = AnthropicBatchMaxRequests
	}
	if req.Requests == nil {
		bad("requests: Field required")
		return
	}
	reqs := *req.Requests
	switch {
	case len(reqs) == 0:
		bad("requests: List should have at least 1 item after validation, not 0")
		return
	case len(reqs) > limit:
		bad(fmt.Sprintf("requests: List should have at most %d items after validation, not %d", limit, len(reqs)))
		return
	}
	seen := map[string]bool{}
	lines := make([]batchLine, 0, len(reqs))
	for i, rq := range reqs {
		switch {
		case rq.CustomID == nil:
			bad(fmt.Sprintf("requests.%d.custom_id: Field required", i))
			return
		case len(*rq.CustomID) < 1 || len(*rq.CustomID) > 64:
			bad(fmt.Sprintf("requests.%d.custom_id: String should have between 1 and 64 characters", i))
			return
		case len(rq.Params) == 0 || bytes.Equal(rq.Params, []byte("null")):
			bad(fmt.Sprintf("requests.%d.params: Field required", i))
			return
		case seen[*rq.CustomID]:
			bad(fmt.Sprintf("requests.%d.custom_id: duplicate custom_id %q; each request in a batch needs its own", i, *rq.CustomID))
			return
		}
		seen[*rq.CustomID] = true
		lines = append(lines, batchLine{customID: *rq.CustomID, body: rq.Params})
	}
	if s.sc.Batch.failsValidation(body) {
		bad(s.sc.Batch.FailValidation.Message)
		return
	}
	s.arriveLocked(true)
	if s.balance != nil && *s.balance <= 0 {
		s.stats.RequestsWhileExhausted++
		s.stats.Batches.CreatesRefused++
		writeReply(w, v.fail(ActionExhausted, Step{}, e))
		return
	}
	b := &batchJob{
		vendor: v, id: "msgbatch_01" + newRnd(s.sc.Seed, "batch", strconv.FormatUint(s.seq, 10)).text(22, base58),
		cfg: s.sc.Batch, price: s.sc.Batch.price(s.sc.Price), host: r.Host,
		lines: lines, status: stInProgress, created: e.now, inProgressAt: e.now,
	}
	b.order = shuffle(s.sc.Seed, b.id, len(lines))
	s.batch.jobs[b.id] = b
	s.batch.all = append(s.batch.all, b)
	s.stats.Batches.Created++
	s.sc.Logger.Debug("batch created", "vendor", v.name(), "batch_id", b.id, "lines", len(b.lines))
	s.stats.Batches.Lines += len(lines)
	out := b.anthropicObject(e.now)
	s.advanceLocked(b, e.now)
	s.broadcastLocked()
	writeReplyJSON(w, v, e, http.StatusOK, out)
}

func (s *Server) anthropicBatchLocked(w http.ResponseWriter, r *http.Request) (*batchJob, *errInfo, bool) {
	v := anthropic{}
	e, rej := s.batchRequestLocked(v, r)
	if rej != nil {
		writeReply(w, rej)
		return nil, nil, false
	}
	b := s.batch.jobs[r.PathValue("id")]
	if _, ok := b.vendorOrNil().(anthropic); !ok {
		writeReply(w, v.notFound(r, e))
		return nil, nil, false
	}
	return b, e, true
}

func (s *Server) serveAnthropicBatchGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	if b, e, ok := s.anthropicBatchLocked(w, r); ok {
		writeReplyJSON(w, anthropic{}, e, http.StatusOK, b.anthropicObject(e.now))
	}
}

func (s *Server) serveAnthropicBatchCancel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	b, e, ok := s.anthropicBatchLocked(w, r)
	if !ok {
		return
	}
	switch b.status {
	case stInProgress, stFinalizing:
		s.cancelLocked(b, e.now)
	case stCancelling:
	default:
		writeReply(w, anthropic{}.errReply(e, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("Message Batch %s has already ended and can no longer be canceled.", b.id)))
		return
	}
	writeReplyJSON(w, anthropic{}, e, http.StatusOK, b.anthropicObject(e.now))
}

type anthropicBatchResult struct {
	Type    string          `json:"type"`
	Message json.RawMessage `json:"message,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type anthropicBatchResultLine struct {
	CustomID string               `json:"custom_id"`
	Result   anthropicBatchResult `json:"result"`
}

// serveAnthropicBatchResults streams one JSONL line per request, in the order
// the lines ran (not the order they were sent), then the ones that never ran.
// An errored line carries the same envelope a synchronous call would get.
func (s *Server) serveAnthropicBatchResults(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	b, e, ok := s.anthropicBatchLocked(w, r)
	if !ok {
		return
	}
	v := anthropic{}
	switch {
	case !b.terminal():
		writeReply(w, v.errReply(e, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("Message Batch %s has not yet ended; results are available once processing_status is ended.", b.id)))
		return
	case b.archived(e.now):
		writeReply(w, v.errReply(e, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("The results of Message Batch %s are no longer available.", b.id)))
		return
	}
	var out bytes.Buffer
	for _, i := range b.order {
		ln := &b.lines[i]
		res := anthropicBatchResult{}
		switch ln.state {
		case lineSucceeded:
			res.Type, res.Message = "succeeded", ln.resp
		case lineErrored:
			res.Type, res.Error = "errored", ln.resp
		case lineExpired:
			res.Type = "expired"
		case lineCanceled:
			res.Type = "canceled"
		default:
			continue
		}
		out.Write(marshal(anthropicBatchResultLine{ln.customID, res}, ""))
		out.WriteByte('\n')
	}
	v.headers(w.Header(), e)
	w.Header().Set("Content-Type", "application/x-jsonl")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes())
}

func (s *Server) serveAnthropicBatchList(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := anthropic{}
	e, rej := s.batchRequestLocked(v, r)
	if rej != nil {
		writeReply(w, rej)
		return
	}
	q := r.URL.Query()
	page, more := s.batch.listLocked(v, q.Get("after_id"), q.Get("before_id"), listLimit(r, 1000))
	data := make([]json.RawMessage, len(page))
	for i, b := range page {
		data[i] = b.anthropicObject(e.now)
	}
	o := struct {
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
	}{Data: data, HasMore: more}
	if len(page) > 0 {
		o.FirstID, o.LastID = &page[0].id, &page[len(page)-1].id
	}
	writeReplyJSON(w, v, e, http.StatusOK, marshal(o, ""))
}
