package fakeprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// BatchScenario scripts the Batch APIs (OpenAI files + batches, Anthropic
// message batches). Time is the scenario clock (Scenario.Now), so a test moves
// its clock instead of waiting hours. A batch moves forward when it is looked
// at: any batch endpoint, Stats or GET /__stats.
type BatchScenario struct {
	// ValidateFor is how long an OpenAI batch stays "validating" before its
	// input file is checked. Anthropic batches have no such phase. Default 0.
	ValidateFor Duration `json:"validate_for,omitempty"`
	// Latency is how long processing every line takes, from the end of
	// validation; lines finish evenly spread over it, in a shuffled order.
	// Default 0: all lines finish at once.
	Latency Duration `json:"latency,omitempty"`
	// FinalizeFor is how long a batch whose lines are all done stays
	// "finalizing" (OpenAI) or "in_progress" (Anthropic) before it ends. Default 0.
	FinalizeFor Duration `json:"finalize_for,omitempty"`
	// ExpireAfter is the completion window, from creation: lines not done by
	// then expire and the batch ends with partial results. Default
	// BatchExpireAfterDefault (24h, both vendors).
	ExpireAfter Duration `json:"expire_after,omitempty"`
	// ExpireShare is the share of lines (0..1) that never finish, so the batch
	// expires at ExpireAfter with that many lines unfinished whatever Latency
	// says. 0: only Latency decides.
	ExpireShare float64 `json:"expire_share,omitempty"`
	// CancelFor is how long a cancelled batch stays "cancelling"/"canceling"
	// before it ends; OpenAI says up to 10 minutes. Default 0.
	CancelFor Duration `json:"cancel_for,omitempty"`
	// FailValidation, when set, makes every OpenAI batch fail validation with
	// this error (after any real ones found in the file), and every Anthropic
	// batch creation answer 400 with its message.
	FailValidation *BatchError `json:"fail_validation,omitempty"`
	// FailValidationIf, when set, limits FailValidation to the batches with
	// a line holding this text (the OpenAI input file, the Anthropic create
	// body): one bad record makes the whole batch fail, naming no line, as a
	// file error does.
	FailValidationIf string `json:"fail_validation_if,omitempty"`
	// Price per million tokens for batch lines. Zero fields: half the
	// synchronous price, as both vendors charge.
	Price Price `json:"price,omitzero"`
	// MaxRequests caps the lines in one batch. Default: the vendor's limit
	// (OpenAI 50,000, Anthropic 100,000).
	MaxRequests int `json:"max_requests,omitempty"`
}

// BatchError is one entry of an OpenAI batch's errors.data: why validation
// failed, and on which input line.
type BatchError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Line is 1-based; 0 (null on the wire) when the error is about the file.
	Line  int    `json:"line,omitempty"`
	Param string `json:"param,omitempty"`
}

// Official limits and windows (docs/batch-api.md gives the sources).
const (
	BatchExpireAfterDefault   = Duration(24 * time.Hour)
	OpenAIBatchMaxRequests    = 50000
	OpenAIBatchMaxFileBytes   = 200 << 20
	AnthropicBatchMaxRequests = 100000
	AnthropicBatchMaxBytes    = 256 << 20
	// openAIFileExpiry: files with purpose batch expire after 30 days.
	openAIFileExpiry = 30 * 24 * time.Hour
)

func (b BatchScenario) validate() error {
	switch {
	case b.ValidateFor < 0 || b.Latency < 0 || b.FinalizeFor < 0 || b.ExpireAfter < 0 || b.CancelFor < 0:
		return errors.New("batch: durations must not be negative")
	case b.ExpireShare < 0 || b.ExpireShare > 1:
		return fmt.Errorf("batch.expire_share: %v is not a share", b.ExpireShare)
	case b.Price.InputUSDPerMTok < 0 || b.Price.OutputUSDPerMTok < 0:
		return errors.New("batch.price: must not be negative")
	case b.MaxRequests < 0:
		return errors.New("batch.max_requests: must not be negative")
	case b.FailValidation != nil && b.FailValidation.Code == "":
		return errors.New("batch.fail_validation.code: required")
	}
	return nil
}

// failsValidation reports whether FailValidation applies to a batch whose
// input is data.
func (b BatchScenario) failsValidation(data []byte) bool {
	return b.FailValidation != nil && (b.FailValidationIf == "" || bytes.Contains(data, []byte(b.FailValidationIf)))
}

func (b BatchScenario) expireAfter() time.Duration {
	if b.ExpireAfter == 0 {
		return time.Duration(BatchExpireAfterDefault)
	}
	return time.Duration(b.ExpireAfter)
}

// price is the batch price: what the scenario says, else half of sync.
func (b BatchScenario) price(sync Price) Price {
	p := b.Price
	if p.InputUSDPerMTok == 0 {
		p.InputUSDPerMTok = sync.InputUSDPerMTok / 2
	}
	if p.OutputUSDPerMTok == 0 {
		p.OutputUSDPerMTok = sync.OutputUSDPerMTok / 2
	}
	return p
}

// BatchStats counts what the Batch APIs saw. Lines that ran are also counted
// in Stats.Requests, ByStatus, ByAction and ByRecord (keyed by custom_id) like
// synchronous calls, and their bills in BilledCalls and BilledUSD.
type BatchStats struct {
	FilesUploaded int `json:"files_uploaded"`
	Created       int `json:"created"`
	// Lines submitted in created batches (OpenAI: once validated).
	Lines            int `json:"lines"`
	Succeeded        int `json:"succeeded"`
	Errored          int `json:"errored"`
	Expired          int `json:"expired"`
	Canceled         int `json:"canceled"`
	FailedValidation int `json:"failed_validation"`
	// CreatesRefused counts Anthropic creates answered with an error
	// (validation, balance): no batch was made.
	CreatesRefused int `json:"creates_refused"`
	// LinesWhileExhausted counts the lines of created batches that ran
	// while the prepaid balance was spent (they are in
	// Stats.RequestsWhileExhausted too): a batch accepted before the
	// balance ran out keeps running, and its lines are not requests the
	// client sent after it.
	LinesWhileExhausted int `json:"lines_while_exhausted"`
	// BilledUSD is the part of Stats.BilledUSD billed at batch prices.
	BilledUSD float64 `json:"billed_usd"`
	// Polls counts batch management requests (create, get, cancel, files,
	// results); they are not model calls and not in Stats.Requests.
	Polls int `json:"polls"`
}

// Batch states, in OpenAI's words; Anthropic's are derived from them.
const (
	stValidating = "validating"
	stFailed     = "failed"
	stInProgress = "in_progress"
	stFinalizing = "finalizing"
	stCompleted  = "completed"
	stExpired    = "expired"
	stCancelling = "cancelling"
	stCancelled  = "cancelled"
)

// What became of one line.
const (
	linePending = iota
	lineSucceeded
	lineErrored
	lineExpired
	lineCanceled
)

type batchLine struct {
	customID string
	body     []byte // the request body (OpenAI "body", Anthropic "params")
	state    int
	status   int    // HTTP status the line got, when it ran
	reqID    string // the request id it ran under
	resp     []byte // compact response body: the answer or the vendor's error
}

type batchFile struct {
	id       string
	filename string
	purpose  string
	data     []byte
	created  time.Time
}

type batchJob struct {
	vendor vendor
	id     string
	cfg    BatchScenario // as it was when the batch was created
	price  Price

	endpoint, inputFileID string
	metadata              json.RawMessage
	model                 string
	host                  string // for Anthropic's results_url
	input                 []byte // OpenAI: the input file, until validation splits it

	lines []batchLine
	order []int // processing order: a seeded shuffle
	done  int   // how many of order have run

	status                                         string
	errors                                         []BatchError
	created, inProgressAt, finalizingAt, endedAt   time.Time
	failedAt, expiredAt, cancellingAt, cancelledAt time.Time
	outputFileID, errorFileID                      string
	succeeded, errored, expired, canceled          int
	inTok, outTok                                  int
}

func (b *batchJob) expiresAt() time.Time { return b.created.Add(b.cfg.expireAfter()) }

func (b *batchJob) terminal() bool {
	switch b.status {
	case stFailed, stCompleted, stExpired, stCancelled:
		return true
	}
	return false
}

// dueAt is when the k-th line (0-based, in processing order) finishes.
func (b *batchJob) dueAt(k int) time.Time {
	n := len(b.lines)
	return b.inProgressAt.Add(time.Duration(int64(b.cfg.Latency) * int64(k+1) / int64(n)))
}

// runnable is how many lines can ever finish; the rest expire.
func (b *batchJob) runnable() int {
	n := len(b.lines)
	if b.cfg.ExpireShare > 0 {
		n -= int(float64(n)*b.cfg.ExpireShare + 0.5)
	}
	return n
}

// batchStore is the providers' side of the Batch APIs: uploaded and generated
// files, and batches of both vendors. Guarded by Server.mu.
type batchStore struct {
	muxOnce sync.Once
	mux     *http.ServeMux

	files map[string]*batchFile
	jobs  map[string]*batchJob
	all   []*batchJob // creation order, so batches advance in a fixed order
	// billed is the answer each custom_id was last billed with; the same
	// answer is in Server.idem under that key. If a synchronous call bills the
	// key again, idem holds a different answer: a double bill across modes.
	billed map[string]*answer
}

func (st *batchStore) reset() {
	st.files, st.jobs, st.all, st.billed = nil, nil, nil, nil
}

func (st *batchStore) init() {
	if st.jobs == nil {
		st.files = map[string]*batchFile{}
		st.jobs = map[string]*batchJob{}
		st.billed = map[string]*answer{}
	}
}

// serveBatchAPI answers the Batch API routes and reports whether r was one.
func (s *Server) serveBatchAPI(w http.ResponseWriter, r *http.Request) bool {
	s.batch.muxOnce.Do(func() {
		m := http.NewServeMux()
		m.HandleFunc("POST /v1/files", s.serveFileUpload)
		m.HandleFunc("GET /v1/files/{id}", s.serveFileGet)
		m.HandleFunc("DELETE /v1/files/{id}", s.serveFileDelete)
		m.HandleFunc("GET /v1/files/{id}/content", s.serveFileContent)
		m.HandleFunc("POST /v1/batches", s.serveOpenAIBatchCreate)
		m.HandleFunc("GET /v1/batches", s.serveOpenAIBatchList)
		m.HandleFunc("GET /v1/batches/{id}", s.serveOpenAIBatchGet)
		m.HandleFunc("POST /v1/batches/{id}/cancel", s.serveOpenAIBatchCancel)
		m.HandleFunc("POST /v1/messages/batches", s.serveAnthropicBatchCreate)
		m.HandleFunc("GET /v1/messages/batches", s.serveAnthropicBatchList)
		m.HandleFunc("GET /v1/messages/batches/{id}", s.serveAnthropicBatchGet)
		m.HandleFunc("POST /v1/messages/batches/{id}/cancel", s.serveAnthropicBatchCancel)
		m.HandleFunc("GET /v1/messages/batches/{id}/results", s.serveAnthropicBatchResults)
		s.batch.mux = m
	})
	if _, pattern := s.batch.mux.Handler(r); pattern == "" {
		return false
	}
	s.batch.mux.ServeHTTP(w, r)
	return true
}

// batchRequestLocked starts a management request: it counts it, advances
// every batch to now and authenticates. A non-nil reply is to be sent as is.
func (s *Server) batchRequestLocked(v vendor, r *http.Request) (*errInfo, *reply) {
	s.batch.init()
	s.stats.Batches.Polls++
	e := s.newErrInfoLocked(v, r)
	s.advanceBatchesLocked(e.now)
	s.broadcastLocked()
	return e, v.auth(r, s.sc.APIKey, e)
}

// listLocked pages through one vendor's batches, newest first, as both list
// endpoints do: after gives the page following that id, before the page
// preceding it. A submitter that crashed between creating a batch and
// recording its id finds it here.
func (st *batchStore) listLocked(v vendor, after, before string, limit int) (page []*batchJob, hasMore bool) {
	var all []*batchJob
	for i := len(st.all) - 1; i >= 0; i-- {
		if b := st.all[i]; b.vendor.name() == v.name() {
			all = append(all, b)
		}
	}
	index := func(id string) int {
		for i, b := range all {
			if b.id == id {
				return i
			}
		}
		return -1
	}
	switch {
	case before != "":
		end := max(index(before), 0)
		start := max(end-limit, 0)
		return all[start:end], start > 0
	case after != "":
		start := index(after) + 1
		if start == 0 {
			start = len(all)
		}
		all = all[start:]
	}
	if len(all) > limit {
		return all[:limit], true
	}
	return all, false
}

// listLimit reads ?limit= within [1, maxLimit], default 20.
func listLimit(r *http.Request, maxLimit int) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n < 1 {
		return 20
	}
	return min(n, maxLimit)
}

// advanceBatchesLocked runs every line due by now and ends batches whose time
// has come, then looks for keys a synchronous call billed again.
func (s *Server) advanceBatchesLocked(now time.Time) {
	for _, b := range s.batch.all {
		s.advanceLocked(b, now)
	}
	for k, a := range s.batch.billed {
		if cur := s.idem[k]; cur != nil && cur != a {
			s.stats.DoubleBilledRecords++
			s.batch.billed[k] = cur
		}
	}
}

func (s *Server) advanceLocked(b *batchJob, now time.Time) {
	for {
		switch b.status {
		case stValidating:
			at := b.created.Add(time.Duration(b.cfg.ValidateFor))
			if now.Before(at) {
				return
			}
			s.validateOpenAIBatchLocked(b, at)
		case stInProgress:
			exp := b.expiresAt()
			for b.done < b.runnable() {
				at := b.dueAt(b.done)
				if at.After(now) || !at.Before(exp) {
					break
				}
				s.runLineLocked(b, b.order[b.done], at)
				b.done++
			}
			switch {
			case b.done == len(b.lines):
				b.status, b.finalizingAt = stFinalizing, b.inProgressAt
				if len(b.lines) > 0 {
					b.finalizingAt = b.dueAt(len(b.lines) - 1)
				}
			case !now.Before(exp):
				s.endLocked(b, stExpired, exp)
			default:
				return
			}
		case stFinalizing:
			at := b.finalizingAt.Add(time.Duration(b.cfg.FinalizeFor))
			if now.Before(at) {
				return
			}
			s.endLocked(b, stCompleted, at)
		case stCancelling:
			at := b.cancellingAt.Add(time.Duration(b.cfg.CancelFor))
			if now.Before(at) {
				return
			}
			s.endLocked(b, stCancelled, at)
		default:
			return
		}
	}
}

// cancelLocked stops a batch: lines not run yet will not run.
func (s *Server) cancelLocked(b *batchJob, now time.Time) {
	if b.status == stValidating {
		b.input = nil // it never ran a line
	}
	b.status, b.cancellingAt = stCancelling, now
}

// endLocked settles the lines that did not run and writes the result files.
func (s *Server) endLocked(b *batchJob, status string, at time.Time) {
	left := lineExpired
	if status == stCancelled {
		left = lineCanceled
	}
	if status != stCompleted {
		for _, i := range b.order[b.done:] {
			b.lines[i].state = left
			if left == lineExpired {
				b.expired++
				s.stats.Batches.Expired++
			} else {
				b.canceled++
				s.stats.Batches.Canceled++
			}
		}
	}
	b.status, b.endedAt = status, at
	s.sc.Logger.Debug("batch ended", "vendor", b.vendor.name(), "batch_id", b.id, "status", status,
		"succeeded", b.succeeded, "errored", b.errored, "expired", b.expired, "canceled", b.canceled)
	switch status {
	case stCompleted:
	case stExpired:
		b.expiredAt = at
	case stCancelled:
		b.cancelledAt = at
	}
	if openAIFamily(b.vendor) {
		s.writeOpenAIResultFilesLocked(b, at)
	}
}

// runLineLocked runs one line through the same checks as a synchronous call
// (record script, script, outages, balance, poison, rate limit, random
// faults), at the time it is due, and bills it at batch prices. It never
// replays an Idempotency-Key: a provider runs every line it is given.
func (s *Server) runLineLocked(b *batchJob, i int, at time.Time) {
	ln := &b.lines[i]
	v := b.vendor
	path := "/v1/chat/completions"
	switch v.(type) {
	case anthropic:
		path = "/v1/messages"
	case responsesAPI:
		path = "/v1/responses"
	}
	r, _ := http.NewRequest(http.MethodPost, path, http.NoBody)
	r.Header.Set(RecordHeader, ln.customID)
	e := s.newErrInfoLocked(v, r)
	e.now, e.latency = at, 0
	if s.bucket != nil {
		e.rate = s.bucket.snapshot(at)
	}
	ln.reqID = e.reqID

	record := ln.customID
	rs := s.stats.ByRecord[record]
	s.stats.Requests++
	if _, ok := v.(responsesAPI); ok {
		s.stats.ResponsesAPI++
	}
	rs.Requests++
	rs.IdempotencyKeys = append(rs.IdempotencyKeys, ln.customID)
	var action Action
	defer func() {
		rs.Statuses = append(rs.Statuses, ln.status)
		rs.Actions = append(rs.Actions, action)
		s.stats.ByRecord[record] = rs
		s.stats.ByStatus[ln.status]++
		s.stats.ByAction[action]++
		if ln.state == lineSucceeded {
			b.succeeded++
			s.stats.Batches.Succeeded++
		} else {
			b.errored++
			s.stats.Batches.Errored++
		}
	}()
	fail := func(rep *reply) {
		ln.state, ln.status, ln.resp = lineErrored, rep.status, compactJSON(rep.body)
	}

	c, rej := v.parse(r, ln.body, e)
	if rej != nil {
		action = ActionInvalidParam
		fail(rej)
		return
	}
	s.n++
	s.attempts[record]++
	exhausted := s.balance != nil && *s.balance <= 0
	if exhausted {
		s.stats.RequestsWhileExhausted++
		s.stats.Batches.LinesWhileExhausted++
	}
	step := s.pickLocked(c, record, s.n, s.attempts[record], exhausted, e)
	action = step.action()
	c.offSchema = action == ActionOffSchema
	if action == ActionRateLimit && e.retryAfter == 0 {
		e.retryAfter = time.Duration(RetryAfterDefault)
	}
	if step.RetryAfter > 0 {
		e.retryAfter = time.Duration(step.RetryAfter)
	}
	switch action {
	case ActionOK, ActionOffSchema:
	case ActionPolicy:
		if !v.refusalIsAnswer() {
			fail(v.fail(action, step, e))
			return
		}
	case ActionHang, ActionCutStream, ActionStreamError, ActionGarbage:
		// Transport faults have no place inside a batch: the provider reports
		// the line as its own server error instead, unbilled.
		action = ActionServerError
		fail(v.fail(action, Step{}, e))
		return
	default:
		fail(v.fail(action, step, e))
		return
	}
	a := s.billLineLocked(b, c, &rs, ln.customID, action == ActionPolicy, at)
	if action == ActionOK || action == ActionOffSchema {
		rs.Answers++
	}
	ln.state, ln.status, ln.resp = lineSucceeded, http.StatusOK, compactJSON(v.body(c, a))
	b.inTok += a.inputTokens
	b.outTok += a.outputTokens
}

// billLineLocked is billLocked at the batch's price. A custom_id billed before,
// in an earlier batch or as the Idempotency-Key of a synchronous call, is a
// double bill: the worker uses the job's idempotency key for both.
func (s *Server) billLineLocked(b *batchJob, c *call, rs *RecordStats, key string, refusal bool, at time.Time) *answer {
	a := &answer{
		id:          b.vendor.answerID(newRnd(s.sc.Seed, "answer", strconv.FormatUint(s.seq, 10))),
		created:     at.Unix(),
		model:       c.model,
		refusal:     refusal,
		inputTokens: c.inputTokens,
	}
	if !refusal {
		a.text, a.tool = answerFor(c), c.tool
	}
	a.outputTokens = outputTokens(a.text)
	cost := float64(a.inputTokens)*b.price.InputUSDPerMTok/1e6 + float64(a.outputTokens)*b.price.OutputUSDPerMTok/1e6
	s.stats.BilledCalls++
	s.stats.BilledUSD += cost
	s.stats.Batches.BilledUSD += cost
	s.stats.InputTokens += a.inputTokens
	s.stats.OutputTokens += a.outputTokens
	rs.Billed++
	switch {
	case rs.Billed == 2:
		s.stats.DoubleBilledRecords++
	case rs.Billed == 1 && s.idem[key] != nil:
		s.stats.DoubleBilledRecords++
	}
	if s.balance != nil {
		*s.balance -= cost
	}
	s.idem[key] = a
	s.batch.billed[key] = a
	return a
}

// shuffle is the order lines run in: seeded, so results come back out of
// input order the same way every run.
func shuffle(seed int64, id string, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := int(newRnd(seed, "batch-order", id, strconv.Itoa(i)).float() * float64(i+1))
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// compactJSON puts a body on one line, as JSONL needs; the vendors'
// synchronous bodies are pretty-printed.
func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return bytes.TrimSpace(b)
	}
	return buf.Bytes()
}

func writeReplyJSON(w http.ResponseWriter, v vendor, e *errInfo, status int, body []byte) {
	v.headers(w.Header(), e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
