package fakeprovider

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A background response is a Responses-API call created with
// background: true. The create is answered at once with status "queued";
// each GET /v1/responses/{id} moves it one step, to "in_progress" and then
// to its end: "completed", "failed" (stream_error, with its code),
// "incomplete" (incomplete, or an answer longer than max_output_tokens).
// With Scenario.GenerationTime it stays in progress until that long after
// the create (on the scenario clock). It is billed when it ends, so a response cancelled
// (POST /v1/responses/{id}/cancel) while queued or in progress costs
// nothing; a cancel that comes after its GenerationTime finds it ended
// (billed) and returns it as it is. Every check of a synchronous call (rate limit, outage, balance,
// poison, scripts) applies to the create; a create that hangs, is cut or
// garbled still made a response, which runs to its end and is billed at
// once: the client lost only the id.
type bgResponse struct {
	id      string
	created int64
	at      time.Time // on the scenario clock
	c       *call
	record  string
	key     string
	step    Step
	action  Action
	status  string // queued, in_progress, completed, failed, incomplete, cancelled
	ans     *answer
	errCode string
	text    *string    // a failed response's partial output
	usage   *respUsage // a failed response's usage
}

func (b *bgResponse) terminal() bool {
	return b.status != "queued" && b.status != "in_progress"
}

func (b *bgResponse) object() respObject {
	return responsesAPI{}.object(b.c, respState{id: b.id, status: b.status, created: b.created, ans: b.ans,
		errCode: b.errCode, text: b.text, usage: b.usage})
}

// createBackgroundLocked makes the background response of an accepted
// create; a create whose answer is a transport fault ends it at once.
func (s *Server) createBackgroundLocked(d *decision, key string) *bgResponse {
	if s.responses == nil {
		s.responses, s.responseByKey = map[string]*bgResponse{}, map[string]*bgResponse{}
	}
	b := &bgResponse{
		id:      responsesAPI{}.answerID(newRnd(s.sc.Seed, "answer", strconv.FormatUint(s.seq, 10))),
		created: d.info.now.Unix(), at: d.info.now, c: d.call, record: d.record, key: key, step: d.step, action: d.action, status: "queued",
	}
	s.responses[b.id] = b
	if key != "" {
		s.responseByKey[key] = b
	}
	switch d.action {
	case ActionHang, ActionCutStream, ActionGarbage, ActionStallStream:
		s.completeBackgroundLocked(b)
		d.ans = b.ans
	}
	s.stats.BackgroundCreated++
	return b
}

// completeBackgroundLocked ends a background response and bills it.
func (s *Server) completeBackgroundLocked(b *bgResponse) {
	v := responsesAPI{}
	rs := s.stats.ByRecord[b.record]
	now := s.sc.Now()
	switch b.action {
	case ActionStreamError:
		n := b.step.cutChunks()
		a := s.billLocked(v, b.c, &rs, b.key, false, now, n)
		a.id = b.id
		code := b.step.Code
		if code == "" {
			code = "server_error"
		}
		text := generatedText(a.text, n)
		b.ans, b.status, b.errCode, b.text = a, "failed", code, &text
		b.usage = usageOf(a.inputTokens, outputTokens(text))
	default:
		a := s.billLocked(v, b.c, &rs, b.key, false, now, -1)
		a.id = b.id
		if b.action == ActionOK || b.action == ActionOffSchema {
			rs.Answers++
		}
		b.ans, b.status = a, finalStatus(a)
	}
	s.stats.ByRecord[b.record] = rs
}

// serveResponseByID answers GET /v1/responses/{id} (one step further) and
// POST /v1/responses/{id}/cancel.
func (s *Server) serveResponseByID(w http.ResponseWriter, r *http.Request) {
	v := responsesAPI{}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/responses/")
	id, cancel := strings.CutSuffix(rest, "/cancel")
	s.mu.Lock()
	e := s.newErrInfoLocked(v, r)
	if rej := v.auth(r, s.sc.APIKey, e); rej != nil {
		s.mu.Unlock()
		writeReply(w, rej)
		return
	}
	if (cancel && r.Method != http.MethodPost) || (!cancel && r.Method != http.MethodGet) || strings.Contains(id, "/") {
		s.mu.Unlock()
		writeReply(w, v.errReply(e, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", nil, nil))
		return
	}
	b := s.responses[id]
	if b == nil {
		s.mu.Unlock()
		writeReply(w, v.errReply(e, http.StatusNotFound, fmt.Sprintf("Response with id '%s' not found.", id), "invalid_request_error", nil, nil))
		return
	}
	switch {
	case cancel:
		s.stats.BackgroundCancels++
		if g := time.Duration(s.sc.GenerationTime); !b.terminal() && g > 0 && !s.sc.Now().Before(b.at.Add(g)) {
			// Its generation is over: it ended (and was billed) before
			// the cancel came, which finds it ended.
			s.completeBackgroundLocked(b)
		}
		if !b.terminal() {
			b.status = "cancelled"
		}
	default:
		s.stats.BackgroundPolls++
		switch b.status {
		case "queued":
			b.status = "in_progress"
		case "in_progress":
			if g := time.Duration(s.sc.GenerationTime); g <= 0 || !s.sc.Now().Before(b.at.Add(g)) {
				s.completeBackgroundLocked(b)
			}
		}
	}
	body := marshal(b.object(), "  ")
	s.broadcastLocked()
	s.mu.Unlock()
	v.headers(w.Header(), e)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
