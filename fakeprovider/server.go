package fakeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake provider, an http.Handler. Serve it with httptest or
// http.Server; the OpenAI and Anthropic base URLs are both URL+"/v1".
type Server struct {
	mu       sync.Mutex
	sc       Scenario
	start    time.Time      // scenario clock origin, for time-window outages
	n        int            // API requests past authentication since the scenario was set
	attempts map[string]int // per record, since the scenario was set
	bucket   *bucket
	balance  *float64
	idem     map[string]*answer
	stored   []storedCompletion // OpenAI stored completions (stored.go)
	// responses and responseByKey: the Responses API's background
	// responses, by id and by Idempotency-Key (background.go).
	responses     map[string]*bgResponse
	responseByKey map[string]*bgResponse
	stats         Stats
	seq           uint64        // request sequence, for ids
	changed       chan struct{} // closed and replaced on every state change
	batch         batchStore    // the Batch APIs' files and batches (batch.go)
	// arrivals: wall-clock times of billable requests (Arrivals).
	arrivals []Arrival

	closing   chan struct{}
	closeOnce sync.Once
	// genHold, while set, holds every generation from its start until it
	// is closed (HoldGenerations).
	genHold chan struct{}
}

// New returns a Server playing sc. It panics if sc does not validate: a
// scenario from outside the program should go through ParseScenario first.
func New(sc Scenario) *Server {
	if err := sc.Validate(); err != nil {
		panic("fakeprovider: " + err.Error())
	}
	s := &Server{stats: newStats(), idem: map[string]*answer{}, changed: make(chan struct{}), closing: make(chan struct{})}
	s.setLocked(sc)
	return s
}

// setLocked installs a scenario and the state derived from it. A scenario read
// from JSON has no clock or logger, so the current ones carry over.
func (s *Server) setLocked(sc Scenario) {
	if sc.Now == nil {
		sc.Now = s.sc.Now
	}
	if sc.Logger == nil {
		sc.Logger = s.sc.Logger
	}
	s.sc = sc.WithDefaults()
	s.start = s.sc.Now()
	s.n = 0
	s.attempts = map[string]int{}
	s.bucket = newBucket(s.sc.RateLimit, s.start)
	s.balance = nil
	if s.sc.Balance != nil {
		b := s.sc.Balance.USD
		s.balance = &b
	}
}

func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetScenario replaces the scenario live. Counters and the idempotency store
// are kept (the provider remembers what it billed); scripts, windows, the rate
// limit and the balance start afresh from sc.
func (s *Server) SetScenario(sc Scenario) error {
	if err := sc.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(sc)
	s.broadcastLocked()
	s.sc.Logger.Info("scenario set", "name", s.sc.Name)
	return nil
}

// Reset forgets everything: counters, the idempotency store, and the state
// derived from the current scenario, as if the Server were new.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	inFlight, hanging := s.stats.InFlight, s.stats.Hanging
	s.stats = newStats()
	s.stats.InFlight, s.stats.Hanging, s.stats.PeakInFlight = inFlight, hanging, inFlight
	s.idem = map[string]*answer{}
	s.stored = nil
	s.responses, s.responseByKey = nil, nil
	s.batch.reset()
	s.setLocked(s.sc)
	s.broadcastLocked()
	s.sc.Logger.Info("reset")
}

// TopUp adds usd to a limited balance; an unlimited balance stays unlimited.
func (s *Server) TopUp(usd float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.balance != nil {
		*s.balance += usd
	}
	s.broadcastLocked()
	s.sc.Logger.Info("top up", "usd", usd)
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statsLocked()
}

// Arrival is one billable request as it reached the fake: a model call
// past authentication, or a batch create that got as far as the balance
// check (a batch's lines are billed when they run, which the client does
// not time).
type Arrival struct {
	// At is the wall clock (time.Now, not Scenario.Now), so a test can
	// compare it with what it saw of the client's state at the time.
	At time.Time
	// Create: a batch create; false: a model call.
	Create bool
}

// Arrivals returns every billable request's arrival, in order, since New:
// for a test that checks when a client was allowed to call (a breaker).
func (s *Server) Arrivals() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.arrivals)
}

func (s *Server) arriveLocked(create bool) {
	s.arrivals = append(s.arrivals, Arrival{At: time.Now(), Create: create})
}

func (s *Server) statsLocked() Stats {
	s.advanceBatchesLocked(s.sc.Now()) // batches move when looked at
	st := s.stats.clone()
	if s.balance != nil {
		b := *s.balance
		st.BalanceUSD = &b
	}
	return st
}

// WaitFor blocks until cond holds for the counters or ctx ends. It lets tests
// wait for an event (a request hanging, N requests seen) instead of sleeping.
func (s *Server) WaitFor(ctx context.Context, cond func(Stats) bool) error {
	for {
		s.mu.Lock()
		ok := cond(s.statsLocked())
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// HoldGenerations holds every answer's generation (Scenario.GenerationTime)
// at its start until release is called; the generation then runs its time.
// Tests use it to have calls in flight together whatever the machine's
// load, then let them finish.
func (s *Server) HoldGenerations() (release func()) {
	hold := make(chan struct{})
	s.mu.Lock()
	s.genHold = hold
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.genHold = nil
			s.mu.Unlock()
			close(hold)
		})
	}
}

// Close releases every hung request (its connection is dropped, as when a
// provider goes away) and makes later hangs and waits end at once. It does not
// stop the listener: that is the http.Server's job, which can then shut down
// without waiting on hangs.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	return nil
}

// maxBody bounds what is read of a request; vendors cap theirs too.
const maxBody = 32 << 20

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/__stats":
		s.serveStats(w, r)
	case "/__topup":
		s.serveTopUp(w, r)
	case "/__reset":
		if !onlyPost(w, r) {
			return
		}
		s.Reset()
		writeJSON(w, http.StatusOK, s.Stats())
	case "/__set":
		s.serveSet(w, r)
	case "/v1/chat/completions":
		if r.Method == http.MethodGet {
			s.serveStoredList(w, r)
			return
		}
		s.serveAPI(w, r, openAI{})
	case "/v1/messages":
		s.serveAPI(w, r, anthropic{})
	case "/v1/responses":
		s.serveAPI(w, r, responsesAPI{})
	default:
		if strings.HasPrefix(r.URL.Path, "/v1/responses/") {
			s.serveResponseByID(w, r)
			return
		}
		if s.serveBatchAPI(w, r) {
			return
		}
		var v vendor = openAI{}
		if strings.HasPrefix(r.URL.Path, "/v1/messages") || r.Header.Get("x-api-key") != "" {
			v = anthropic{}
		}
		s.mu.Lock()
		e := s.newErrInfoLocked(v, r)
		s.mu.Unlock()
		writeReply(w, v.notFound(r, e))
	}
}

func (s *Server) newErrInfoLocked(v vendor, r *http.Request) *errInfo {
	s.seq++
	seq := strconv.FormatUint(s.seq, 10)
	e := &errInfo{
		reqID:   v.requestID(newRnd(s.sc.Seed, "request", seq)),
		method:  r.Method,
		path:    r.URL.Path,
		now:     s.sc.Now(),
		latency: time.Duration(s.sc.Latency),
	}
	org := newRnd(s.sc.Seed, "org")
	if v.name() == "anthropic" {
		t := org.text(32, hexdig)
		e.orgID = t[:8] + "-" + t[8:12] + "-4" + t[13:16] + "-a" + t[17:20] + "-" + t[20:32]
	} else {
		e.orgID = "org-" + org.text(24, alnum)
	}
	if s.bucket != nil {
		e.rate = s.bucket.snapshot(e.now)
	}
	return e
}

// decision is what one API request gets, settled (and counted) under the lock
// so the counters are exact however many requests race.
type decision struct {
	log          *slog.Logger
	vendor       vendor
	call         *call
	record       string
	action       Action
	step         Step
	status       int
	reply        *reply  // an error answer, written as is
	ans          *answer // the model's answer, for ok, replays and billed faults
	info         *errInfo
	latency      time.Duration
	chunkLatency time.Duration
	// generate: the model generates for this long before the call is billed
	// (bill) and answered; 0: billed in decide.
	generate time.Duration
	bill     func() *answer
	// bg: the background response a Responses-API create made or found.
	bg *bgResponse
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, v vendor) {
	if r.Method != http.MethodPost {
		s.mu.Lock()
		e := s.newErrInfoLocked(v, r)
		s.mu.Unlock()
		writeReply(w, v.notFound(r, e))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return // the client is gone or sent too much; either way nobody reads an answer
	}
	s.enter()
	defer s.leave()
	d := s.decide(r, body, v)
	d.log.Debug("call", "vendor", v.name(), "record", d.record, "action", d.action, "status", d.status)

	ctx := r.Context()
	if !s.wait(ctx, d.latency) {
		return
	}
	if d.generate > 0 {
		s.mu.Lock()
		hold := s.genHold
		s.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-s.closing:
				panic(http.ErrAbortHandler)
			}
		}
		// The model runs to the end whatever the client does, and bills.
		t := time.NewTimer(d.generate)
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			panic(http.ErrAbortHandler)
		}
		d.ans = d.bill()
		if ctx.Err() != nil {
			s.mu.Lock()
			s.stats.BilledAfterClientLeft++
			s.broadcastLocked()
			s.mu.Unlock()
			return
		}
	}
	if d.reply != nil {
		writeReply(w, d.reply)
		return
	}
	if d.bg != nil && !transportFault(d.action) {
		v.headers(w.Header(), d.info)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(marshal(d.bg.object(), "  "))
		return
	}
	switch d.action {
	case ActionHang:
		s.hang(ctx)
	case ActionGarbage:
		v.headers(w.Header(), d.info)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, garbageBody)
	case ActionCutStream, ActionStreamError, ActionStallStream:
		chunks := d.step.cutChunks()
		if !d.call.stream {
			if d.action == ActionStallStream {
				s.stallBody(ctx, w, d)
				return
			}
			s.cutBody(w, d)
			return
		}
		if d.action == ActionStallStream {
			s.stallStream(ctx, w, d, chunks)
			return
		}
		s.writeStream(ctx, w, d, chunks, d.action == ActionStreamError)
	default: // ok, replay, Anthropic refusal
		if d.call.stream {
			s.writeStream(ctx, w, d, -1, false)
			return
		}
		v.headers(w.Header(), d.info)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(v.body(d.call, d.ans))
	}
}

func (s *Server) decide(r *http.Request, body []byte, v vendor) *decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.broadcastLocked()
	sc := &s.sc
	s.advanceBatchesLocked(sc.Now()) // batch lines due before this call run first
	e := s.newErrInfoLocked(v, r)
	d := &decision{log: sc.Logger, vendor: v, info: e, latency: time.Duration(sc.Latency), chunkLatency: time.Duration(sc.ChunkLatency)}

	// Authenticate first, as the vendors do, but parse anyway: the record id
	// of a rejected request still belongs in the stats.
	rej := v.auth(r, sc.APIKey, e)
	c, parseRej := v.parse(r, body, e)
	if rej == nil {
		rej = parseRej
	}
	d.call = c
	if c != nil {
		d.record = c.record
	} else {
		d.record = recordOf(r.Header.Get(RecordHeader), "", []string{string(body)})
	}
	key := r.Header.Get(IdempotencyHeader)
	rs := s.stats.ByRecord[d.record]
	s.stats.Requests++
	if _, ok := v.(responsesAPI); ok {
		s.stats.ResponsesAPI++
	}
	rs.Requests++
	rs.IdempotencyKeys = append(rs.IdempotencyKeys, key)
	defer func() {
		rs.Statuses = append(rs.Statuses, d.status)
		rs.Actions = append(rs.Actions, d.action)
		s.stats.ByRecord[d.record] = rs
		s.stats.ByStatus[d.status]++
		s.stats.ByAction[d.action]++
	}()
	if rej != nil {
		d.reply, d.status = rej, rej.status
		d.action = ActionInvalidParam
		if rej.status == http.StatusUnauthorized {
			d.action = ActionUnauthorized
		}
		return d
	}

	s.n++
	s.arriveLocked(false)
	s.attempts[d.record]++
	n, attempt := s.n, s.attempts[d.record]
	exhausted := s.balance != nil && *s.balance <= 0
	if exhausted {
		s.stats.RequestsWhileExhausted++
	}
	if a := s.idem[key]; key != "" && a != nil && !sc.NoReplay {
		s.stats.IdempotentReplays++
		rs.Replays++
		d.ans, d.action, d.status = a, ActionOK, http.StatusOK
		return d
	}
	if b := s.responseByKey[key]; key != "" && b != nil && c != nil && c.background && !sc.NoReplay {
		// A background create repeated before its response was billed.
		s.stats.IdempotentReplays++
		rs.Replays++
		d.bg, d.action, d.status = b, ActionOK, http.StatusOK
		return d
	}

	d.step = s.pickLocked(c, d.record, n, attempt, exhausted, e)
	if d.step.Body != nil {
		// A body of the test's own: sent as is, with the vendor's headers.
		e.retryAfter = time.Duration(d.step.RetryAfter)
		d.reply = newReply(v, e, d.step.Status, d.step.Body)
		retryHeaders(d.reply.header, e.retryAfter)
		d.action, d.status = actionOfStatus(d.step.Status), d.step.Status
		return d
	}
	d.action = d.step.action()
	c.offSchema = d.action == ActionOffSchema
	if d.action == ActionIncomplete {
		c.incomplete = d.step.Code
		if c.incomplete == "" {
			c.incomplete = "max_output_tokens"
		}
	}
	if d.action == ActionRateLimit && e.retryAfter == 0 {
		e.retryAfter = time.Duration(RetryAfterDefault)
	}
	if d.step.RetryAfter > 0 {
		e.retryAfter = time.Duration(d.step.RetryAfter)
	}

	switch d.action {
	case ActionOK, ActionOffSchema, ActionHang, ActionCutStream, ActionStreamError, ActionGarbage, ActionStallStream, ActionIncomplete:
	case ActionPolicy:
		if !v.refusalIsAnswer() {
			d.reply = v.fail(d.action, d.step, e)
		}
	default:
		d.reply = v.fail(d.action, d.step, e)
	}
	if d.reply != nil {
		d.status = d.reply.status
		return d
	}

	if _, ok := v.(responsesAPI); ok && c.background {
		// Billed when it ends (background.go), at once for a create
		// whose answer is spoilt: the record's stats are handed over and
		// taken back, so that bill is not lost to rs's write-back.
		s.stats.ByRecord[d.record] = rs
		d.bg = s.createBackgroundLocked(d, key)
		rs = s.stats.ByRecord[d.record]
		d.status = http.StatusOK
		if d.action == ActionHang {
			d.status = 0
		}
		return d
	}
	// Everything left ran on the model, so it costs money whether or not the
	// client ever sees the answer.
	if g := time.Duration(sc.GenerationTime); g > 0 && (d.action == ActionOK || d.action == ActionOffSchema || d.action == ActionPolicy) {
		refusal, now := d.action == ActionPolicy, e.now
		d.generate = g
		d.bill = func() *answer {
			s.mu.Lock()
			defer s.mu.Unlock()
			defer s.broadcastLocked()
			rs := s.stats.ByRecord[d.record]
			a := s.billLocked(v, c, &rs, key, refusal, now, -1)
			if !refusal {
				rs.Answers++
			}
			s.stats.ByRecord[d.record] = rs
			return a
		}
		d.status = http.StatusOK
		return d
	}
	d.ans = s.billLocked(v, c, &rs, key, d.action == ActionPolicy, e.now, d.generated())
	d.status = http.StatusOK
	if d.action == ActionOK || d.action == ActionOffSchema {
		rs.Answers++
	}
	if d.action == ActionHang {
		d.status = 0
	}
	return d
}

// transportFault: the action spoils the answer on its way, not the call.
func transportFault(a Action) bool {
	switch a {
	case ActionHang, ActionCutStream, ActionGarbage, ActionStallStream:
		return true
	}
	return false
}

// actionOfStatus names a custom body's answer in the stats: the action a
// bare status would take, else invalid_param (4xx) or server_error.
func actionOfStatus(status int) Action {
	if a, ok := statusActions[status]; ok {
		return a
	}
	if status < 500 {
		return ActionInvalidParam
	}
	return ActionServerError
}

// pickLocked applies the scenario's checks in their documented order.
func (s *Server) pickLocked(c *call, record string, n, attempt int, exhausted bool, e *errInfo) Step {
	sc := &s.sc
	if steps := sc.RecordScripts[record]; attempt <= len(steps) {
		return steps[attempt-1]
	}
	if n <= len(sc.Script) {
		return sc.Script[n-1]
	}
	since := e.now.Sub(s.start)
	for _, o := range sc.Outages {
		if o.matches(n, since) {
			return o.step()
		}
	}
	if exhausted {
		if sc.Balance != nil && sc.Balance.Answer != nil {
			return *sc.Balance.Answer
		}
		return Step{Action: ActionExhausted}
	}
	text := c.text()
	switch p := sc.Poison; {
	case p.ContextTokens > 0 && c.inputTokens > p.ContextTokens:
		e.ctxLimit = p.ContextTokens
		return Step{Action: ActionContextLength}
	case p.InvalidMarker != "" && strings.Contains(text, p.InvalidMarker):
		return Step{Action: ActionInvalidParam}
	case p.PolicyMarker != "" && strings.Contains(text, p.PolicyMarker):
		return Step{Action: ActionPolicy}
	}
	if s.bucket != nil {
		hit, tooLarge := s.bucket.take(e.now, c.inputTokens)
		e.rate = s.bucket.snapshot(e.now)
		if hit != nil {
			e.hit = hit
			if tooLarge {
				return Step{Action: ActionTooLarge}
			}
			e.retryAfter = hit.wait
			return Step{Action: ActionRateLimit}
		}
	}
	if len(sc.Random) > 0 {
		u := newRnd(sc.Seed, "fault", record, strconv.Itoa(attempt)).float()
		for _, f := range sc.Random {
			if u < f.P {
				return Step{Action: f.Action, Status: f.Status, Chunks: f.Chunks}
			}
			u -= f.P
		}
	}
	return Step{Action: ActionOK}
}

// billLocked bills the call: its input, and its output up to generated
// content chunks (-1: all of it), as a vendor bills the tokens a cut stream
// generated. The stored answer (for replay) is always whole.
func (s *Server) billLocked(v vendor, c *call, rs *RecordStats, key string, refusal bool, now time.Time, generated int) *answer {
	a := &answer{
		id:          v.answerID(newRnd(s.sc.Seed, "answer", strconv.FormatUint(s.seq, 10))),
		created:     now.Unix(),
		model:       c.model,
		refusal:     refusal,
		inputTokens: c.inputTokens,
	}
	if !refusal {
		a.text, a.tool = answerFor(c), c.tool
	}
	_, responses := v.(responsesAPI)
	switch {
	case c.incomplete != "" && !refusal:
		a.text, a.incomplete = generatedText(a.text, max(1, len(chunks(a.text))/2)), c.incomplete
	case responses && c.maxTokens > 0 && outputTokens(a.text) > c.maxTokens:
		// The Responses API stops at max_output_tokens and says so.
		a.text, a.incomplete = a.text[:min(len(a.text), 4*c.maxTokens)], "max_output_tokens"
	}
	a.outputTokens = outputTokens(a.text)
	out := a.outputTokens
	if generated >= 0 {
		out = outputTokens(generatedText(a.text, generated))
	}
	cost := float64(a.inputTokens)*s.sc.Price.InputUSDPerMTok/1e6 + float64(out)*s.sc.Price.OutputUSDPerMTok/1e6
	s.stats.BilledCalls++
	s.stats.BilledUSD += cost
	s.stats.InputTokens += a.inputTokens
	s.stats.OutputTokens += out
	rs.Billed++
	if rs.Billed == 2 {
		s.stats.DoubleBilledRecords++
	}
	if s.balance != nil {
		*s.balance -= cost
	}
	if key != "" {
		s.idem[key] = a
	}
	if _, ok := v.(openAI); ok {
		s.storeLocked(c, a, now)
	}
	return a
}

func (s *Server) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.InFlight++
	s.stats.PeakInFlight = max(s.stats.PeakInFlight, s.stats.InFlight)
	s.broadcastLocked()
}

func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.InFlight--
	s.broadcastLocked()
}

// hang blocks like a provider that took the request and went silent. When
// the Server closes, the connection is dropped rather than answered, because an
// empty 200 would be a lie the client could act on.
func (s *Server) hang(ctx context.Context) {
	s.mu.Lock()
	s.stats.Hanging++
	s.broadcastLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.stats.Hanging--
		s.broadcastLocked()
		s.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
	case <-s.closing:
		panic(http.ErrAbortHandler)
	}
}

// wait sleeps d unless the client leaves (false) or the Server closes (the
// connection is dropped).
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		panic(http.ErrAbortHandler)
	}
}

// cutBody promises a whole JSON body and delivers half, so the client sees an
// unexpected EOF on a 200.
func (s *Server) cutBody(w http.ResponseWriter, d *decision) {
	body := d.vendor.body(d.call, d.ans)
	d.vendor.headers(w.Header(), d.info)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body[:len(body)/2])
	_ = http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

// writeStream sends the answer as SSE. cut >= 0 stops after that many content
// chunks: with fail, the vendor's error event follows and the stream ends;
// without, the connection is dropped mid-stream.
func (s *Server) writeStream(ctx context.Context, w http.ResponseWriter, d *decision, cut int, fail bool) {
	head, deltas, tail := d.vendor.stream(d.call, d.ans)
	frames := append([][]byte{}, head...)
	if cut >= 0 {
		frames = append(frames, deltas[:min(cut, len(deltas))]...)
	} else {
		frames = append(append(frames, deltas...), tail...)
	}
	if fail {
		if rv, ok := d.vendor.(responsesAPI); ok {
			frames = append(frames, rv.failEvent(d.call, d.ans, d.step, len(frames), cut))
		} else {
			frames = append(frames, d.vendor.streamError(d.info))
		}
	}
	if !s.sendFrames(ctx, w, d, frames) {
		return
	}
	if cut >= 0 && !fail {
		panic(http.ErrAbortHandler)
	}
}

// sendFrames writes the SSE status line and headers, then frames, one flush
// each, chunk_latency apart. It reports false when the client went away or
// the server is closing.
func (s *Server) sendFrames(ctx context.Context, w http.ResponseWriter, d *decision, frames [][]byte) bool {
	h := w.Header()
	d.vendor.headers(h, d.info)
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, f := range frames {
		if i > 0 && !s.wait(ctx, d.chunkLatency) {
			return false
		}
		if _, err := w.Write(f); err != nil {
			return false
		}
		_ = rc.Flush()
	}
	return true
}

func writeReply(w http.ResponseWriter, r *reply) {
	for k, vs := range r.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(marshal(v, "  "))
}

func onlyPost(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use POST"})
		return false
	}
	return true
}

// serveStats answers GET /__stats. With min_requests, min_billed or
// min_hanging it long-polls until the counters reach them (or the client gives
// up), so a script can wait for an event without sleeping.
func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "use GET"})
		return
	}
	var conds []func(Stats) bool
	for name, get := range map[string]func(Stats) int{
		"min_requests": func(st Stats) int { return st.Requests },
		"min_billed":   func(st Stats) int { return st.BilledCalls },
		"min_hanging":  func(st Stats) int { return st.Hanging },
	} {
		q := r.URL.Query().Get(name)
		if q == "" {
			continue
		}
		want, err := strconv.Atoi(q)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%s: %v", name, err)})
			return
		}
		conds = append(conds, func(st Stats) bool { return get(st) >= want })
	}
	if len(conds) > 0 {
		err := s.WaitFor(r.Context(), func(st Stats) bool {
			for _, c := range conds {
				if !c(st) {
					return false
				}
			}
			return true
		})
		if err != nil {
			return
		}
	}
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) serveTopUp(w http.ResponseWriter, r *http.Request) {
	if !onlyPost(w, r) {
		return
	}
	var req struct {
		USD *float64 `json:"usd"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.USD == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `body must be {"usd": N}`})
		return
	}
	s.TopUp(*req.USD)
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) serveSet(w http.ResponseWriter, r *http.Request) {
	if !onlyPost(w, r) {
		return
	}
	sc, err := ParseScenario(r.Body)
	if err == nil {
		err = s.SetScenario(sc)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s.Stats())
}
