package classify

import (
	"strconv"
	"strings"
)

// Rule IDs of the fixed rows that are not in a vendor table. Every ID, these
// and "table/reason" for each table row, is pinned by a fixture in testdata/.
const (
	idNotSent          = "phase/not_sent"
	idSentNoResponse   = "phase/sent_no_response"
	idStream           = "phase/stream_failed"
	idUnknownPhase     = "phase/unknown_phase"
	idUnexpectedStatus = "status/unexpected_status"
	idOK               = "2xx/ok"
	idErrorIn2xx       = "2xx/error_in_body"
	idPromptBlocked    = "2xx/prompt_blocked"
	idOutputBlocked    = "2xx/output_blocked"
	idUnknown4xx       = "default/unknown_4xx"
	idUnknown5xx       = "default/unknown_5xx"
)

// LongWait is the wait from which a throttle is read as an exhausted key: a
// response that asks for an hour or more names a quota window (a day, a
// month), not pacing, whatever its status says.
const LongWait = 3600.0

// Classify says what a failed (or successful) call means, with the built-in
// rules only. It is pure: no I/O, no clock, no shared state; the same
// Observation always gives the same Verdict. See the package documentation
// for the rule order.
func Classify(o Observation) Verdict {
	return (*Classifier)(nil).Classify(o)
}

// Classifier classifies with user rules (triage.toml [[rules]]) checked
// before the built-in tables. A nil *Classifier has no user rules. It holds
// no mutable state and is safe for concurrent use.
type Classifier struct {
	rules []UserRule
}

// Classify is the package-level Classify with c's user rules first.
func (c *Classifier) Classify(o Observation) Verdict {
	return boundCode(c.classify(o, 0, nil))
}

// tracer records, for Explain, every rule ID that fired and why the default
// did when none matched. A nil tracer records nothing (the fast path).
type tracer struct {
	ids         []string
	tables      []string // the tables the default fell through
	upstream    bool     // the verdict came from OpenRouter's upstream body
	errorIn2xx  bool     // the verdict read an error envelope inside a 2xx body
	streamError bool     // the verdict read the error event of a stream that delivered no output
}

func (t *tracer) fire(id string) {
	if t != nil {
		t.ids = append(t.ids, id)
	}
}

// classify is Classify with a depth (for OpenRouter's nested upstream body)
// and an optional tracer.
func (c *Classifier) classify(o Observation, depth int, tr *tracer) Verdict {
	switch o.Phase {
	case PhaseNotSent:
		tr.fire(idNotSent)
		return Verdict{Class: Transient, Reason: "not_sent", Known: true, Rule: idNotSent, DecidedBy: DecidedByPhase}
	case PhaseSentNoResponse:
		tr.fire(idSentNoResponse)
		return Verdict{Class: Ambiguous, Reason: "sent_no_response", Known: true, Rule: idSentNoResponse, DecidedBy: DecidedByPhase}
	case PhaseStream:
		// The stream started (2xx), so the request ran and may be billed,
		// whatever the error event inside says (even rate_limit or overloaded).
		if v, ok := c.classifyStreamError(o, depth, tr); ok {
			return v
		}
		tr.fire(idStream)
		return Verdict{Class: Ambiguous, Code: strPtr(lastStreamError(o.Body)), Reason: "stream_failed", Known: true, Rule: idStream, DecidedBy: DecidedByPhase}
	case PhaseResponse, "":
	default:
		tr.fire(idUnknownPhase)
		return Verdict{Class: Rejected, Reason: "unknown_phase", Known: false, Rule: idUnknownPhase, DecidedBy: DecidedByPhase}
	}

	if o.Status < 200 || (o.Status >= 300 && o.Status < 400) || o.Status > 599 {
		// Status 0, 1xx, 3xx or out of range: nothing to go on. Rejected does not
		// resend; known:false raises the unknown-class alert.
		tr.fire(idUnexpectedStatus)
		return Verdict{Class: Rejected, Reason: "unexpected_status", Known: false, Rule: idUnexpectedStatus, DecidedBy: DecidedByStatus}
	}

	f := newFacts(o)
	defer releaseFacts(f)
	if t, ok := header(o.Headers, "x-amzn-errortype"); ok {
		f.amzType, _, _ = strings.Cut(strings.TrimSpace(t), ":")
	}

	if o.Status < 300 {
		// Cheap test first: a success body may be a megabyte long.
		if mayCarryError(o.Body) {
			// An OpenAI Responses-API response that ended "failed" (a
			// background response polled to its end).
			if v, ok := c.classifyStreamError(o, depth, tr); ok {
				return v
			}
			f.parseBody(o.Body)
			if f.hasError {
				return c.classify2xx(f, o, depth, tr)
			}
			if v, ok := c.classifyOtherErrorIn2xx(f, o, tr); ok {
				return v
			}
		}
		tr.fire(idOK)
		return Verdict{Class: OK, Reason: "ok", Known: true, Rule: idOK, DecidedBy: DecidedByStatus}
	}

	f.parseBody(o.Body)
	f.hint, f.undated = retryHint(o.Headers, f.retryDelay)

	v, matched := c.decide(f, o, depth, tr)
	if !matched {
		if o.Status < 500 {
			tr.fire(idUnknown4xx)
			v = Verdict{Class: Rejected, Reason: "unknown_4xx", Known: false, Rule: idUnknown4xx, DecidedBy: DecidedByStatus}
		} else {
			tr.fire(idUnknown5xx)
			v = Verdict{Class: Transient, Reason: "unknown_5xx", Known: false, Rule: idUnknown5xx, DecidedBy: DecidedByStatus}
		}
	}
	return finish(v, f, o)
}

// mayCarryError is the cheap test before a 2xx body is read: an error
// envelope, a Gemini block (promptFeedback, finishReason), an AWS
// JSON-protocol error (__type), a base_resp status (MiniMax) or a
// "content_filter" value (Azure's finish_reason; its content_filter_results
// key, in every Azure success, does not match) or a "msg" member (a business
// code and message in a 200, Baidu Qianfan) or an "Error" member (TencentCloud
// API 3.0's Response.Error, in a 200).
func mayCarryError(body string) bool {
	return strings.Contains(body, "error") || strings.Contains(body, "blockReason") ||
		strings.Contains(body, "finishReason") || strings.Contains(body, "__type") ||
		strings.Contains(body, "base_resp") || strings.Contains(body, `"content_filter"`) ||
		strings.Contains(body, `"msg"`) || strings.Contains(body, `"Error"`)
}

// classify2xx decides a 2xx body that carries an error. A blocked prompt or
// output is rejected: the same request is blocked again. A generation that
// started and then failed (finish_reason "error") may be billed: ambiguous.
// Any other error envelope (OpenAI-compatible servers that answer 200 with
// {"error":…}, Bedrock's {"Output":{"__type":…}}) is read with the tables,
// with the status it names; a terminal or pacing answer stands, anything
// else stays ambiguous because the call may have run.
func (c *Classifier) classify2xx(f *facts, o Observation, depth int, tr *tracer) Verdict {
	switch {
	case f.blockReason != "":
		tr.fire(idPromptBlocked)
		return Verdict{Class: Rejected, Code: strPtr(f.blockReason), Reason: "prompt_blocked", Known: true, Rule: idPromptBlocked, DecidedBy: DecidedByVendorRule}
	case f.blockedFinish != "":
		tr.fire(idOutputBlocked)
		return Verdict{Class: Rejected, Code: strPtr(f.blockedFinish), Reason: "output_blocked", Known: true, Rule: idOutputBlocked, DecidedBy: DecidedByVendorRule}
	}
	if !f.finishError {
		if n, err := strconv.Atoi(f.code); err == nil && n >= 400 && n <= 599 {
			f.status = n
		}
		f.hint, f.undated = retryHint(o.Headers, f.retryDelay)
		if v, ok := c.decide(f, o, depth, tr); ok && v.Known {
			switch {
			case isUserRule(v.Rule), v.Class == Exhausted, v.Class == Rejected, v.Class == Throttled:
				if tr != nil {
					tr.errorIn2xx = true
				}
				return finish(v, f, o)
			}
		}
		if tr != nil {
			tr.ids = tr.ids[:0]
		}
	}
	// OpenRouter: the model started, then failed, and the status line was
	// already sent. Like a broken stream, it may be billed.
	tr.fire(idErrorIn2xx)
	return Verdict{Class: Ambiguous, Code: strPtr(f.defaultCode()), Reason: "error_in_2xx_body", Known: true, Rule: idErrorIn2xx, DecidedBy: DecidedByStatus}
}

// decide runs the user rules, then the built-in tables.
func (c *Classifier) decide(f *facts, o Observation, depth int, tr *tracer) (Verdict, bool) {
	if c != nil {
		for i := range c.rules {
			r := &c.rules[i]
			if r.matches(f) {
				tr.fire(r.id)
				v := Verdict{Class: r.Class, Reason: r.Reason, Known: true, Rule: r.id, DecidedBy: DecidedByUserRule}
				if r.RetryAfterS != nil {
					f.hint, f.undated = ptr(*r.RetryAfterS), false
				}
				return v, true
			}
		}
	}
	return c.runChain(f, o, depth, tr)
}

// finish applies what every table verdict shares: the vendor's code,
// x-should-retry, the retry hint (structured first, then the message text),
// and the long-wait rule.
func finish(v Verdict, f *facts, o Observation) Verdict {
	if v.Code == nil {
		v.Code = strPtr(f.defaultCode())
	}
	v = applyShouldRetry(v, o.Headers)

	switch v.Class {
	case Throttled, Transient, Exhausted:
		if f.hint == nil && f.msg != "" {
			// Only when no header or structured field gave a wait: "Please
			// try again in 7m12s", "retry after 2 seconds", "resets after 5s".
			if s, ok := textWait(f.lower()); ok {
				f.hint, f.undated = ptr(s), false
			}
		}
		// Reported for exhausted too, for the record; the reaction for an
		// exhausted key is the breaker and its probe, not this wait.
		if f.hint != nil {
			v.RetryAfterS = f.hint
			if v.Class != Exhausted && *f.hint >= LongWait && !isUserRule(v.Rule) {
				v.Class, v.Reason = Exhausted, v.Reason+"+long_wait"
			}
		}
		if f.undated && v.RetryAfterS == nil {
			v.Reason += "+retry_after_undated"
		}
	default:
		v.RetryAfterS = nil
	}
	return v
}

func (c *Classifier) runChain(f *facts, o Observation, depth int, tr *tracer) (Verdict, bool) {
	chain, ok := chains[o.Vendor]
	if !ok {
		chain = chains["other"]
	}
	for _, t := range chain {
		if t == requestTable {
			// The model wordings of the lexicon, before any request,
			// vendor or status row (modelSignal).
			if tr != nil {
				tr.tables = append(tr.tables, "signal/model")
			}
			if v, ok := modelSignal(f); ok {
				tr.fire(v.Rule)
				return v, true
			}
		}
		if t == genericTable {
			// The signal layer: under the vendor tables, over the status.
			if tr != nil {
				tr.tables = append(tr.tables, "signal")
			}
			if v, ok := decideSignals(f, o.Body); ok {
				tr.fire(v.Rule)
				return v, true
			}
		}
		if tr != nil {
			tr.tables = append(tr.tables, t.name)
		}
		for i := range t.rules {
			r := &t.rules[i]
			if !r.when(f) {
				continue
			}
			if r.delegate || r.wrapped {
				v, ok := c.classifyUpstream(f, o, r.wrapped, depth, tr)
				if !ok {
					continue
				}
				tr.fire(r.id)
				if tr != nil {
					tr.upstream = true
				}
				v.Rule = r.id
				return v, true
			}
			if r.weak {
				// A terminal signal overrules a pacing or server row that
				// every OpenAI-compatible server shares, and so does a body
				// that states only an overload overrules a pacing row (Moonshot's 429
				// engine_overloaded_error): capacity, not the key's pace.
				if v, ok := decideSignals(f, o.Body); ok && (v.Class == Exhausted || v.Class == Rejected || v.Rule == signalPrefix+"capacity" && r.class == Throttled) {
					tr.fire(v.Rule)
					return v, true
				}
			}
			tr.fire(r.id)
			by := DecidedByVendorRule
			if t == genericTable {
				by = DecidedByStatus
			}
			return Verdict{Class: r.class, Reason: r.reason, Known: !r.unknown, Rule: r.id, DecidedBy: by}, true
		}
	}
	return Verdict{}, false
}

// classifyUpstream classifies OpenRouter's error.metadata.raw (the upstream
// provider's own body, carried as a string) with that provider's tables, or
// (wrapped) the upstream body a gateway carries as its error.message string
// with the same vendor's tables. It is used only when that gives a specific,
// known answer.
func (c *Classifier) classifyUpstream(f *facts, o Observation, wrapped bool, depth int, tr *tracer) (Verdict, bool) {
	if depth > 0 {
		return Verdict{}, false
	}
	status := o.Status
	if n, err := strconv.Atoi(f.code); err == nil && n >= 400 && n <= 599 {
		status = n
	}
	up := Observation{Vendor: upstreamVendor(f.metaProvider), Path: PathDirect, Phase: PhaseResponse, Status: status, Body: f.metaRaw}
	if wrapped {
		up.Vendor, up.Body = o.Vendor, unquote(f.msg)
		if !validJSON(strings.TrimSpace(up.Body)) {
			return Verdict{}, false
		}
	}
	var inner *tracer
	if tr != nil {
		inner = &tracer{}
	}
	v := (*Classifier)(nil).classify(up, depth+1, inner)
	if !v.Known || v.Class == OK {
		return Verdict{}, false
	}
	if tr != nil {
		tr.ids = append(tr.ids, inner.ids...)
	}
	v.Reason = "upstream_" + v.Reason
	return v, true
}

// applyShouldRetry honours x-should-retry (sent by Anthropic; read by the
// OpenAI and Anthropic SDKs). It never makes an exhausted or rejected body
// retryable: "true" only lifts an unknown 4xx default to transient, and
// "false" only stops the retrying classes.
func applyShouldRetry(v Verdict, h map[string]string) Verdict {
	s, ok := header(h, "x-should-retry")
	if !ok {
		return v
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		if v.Class == Rejected && !v.Known {
			v.Class, v.Reason, v.Known = Transient, "x_should_retry_true", true
		}
	case "false":
		switch v.Class {
		case Transient:
			// The server says this request will fail again: do not resend it.
			v.Class, v.Reason = Rejected, v.Reason+"+x_should_retry_false"
		case Throttled:
			// A "rate limit" the server says not to retry is an account-level
			// stop (e.g. a spend cap); calling it rejected would drop jobs.
			v.Class, v.Reason = Exhausted, v.Reason+"+x_should_retry_false"
		}
	}
	return v
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ruleIDs lists every built-in rule ID Classify can fire, for the
// fixture-coverage test and RuleFixture.
func ruleIDs() []string {
	ids := []string{idNotSent, idSentNoResponse, idStream, idUnknownPhase, idUnexpectedStatus,
		idOK, idErrorIn2xx, idPromptBlocked, idOutputBlocked, idUnknown4xx, idUnknown5xx}
	for _, r := range signalReasons {
		ids = append(ids, signalPrefix+r)
	}
	for _, r := range tencentcloudTable.rules {
		ids = append(ids, r.id)
	}
	seen := map[*table]bool{}
	for _, chain := range chains {
		for _, t := range chain {
			if seen[t] {
				continue
			}
			seen[t] = true
			for _, r := range t.rules {
				ids = append(ids, r.id)
			}
		}
	}
	return ids
}
