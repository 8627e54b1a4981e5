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
	idUnknown4xx       = "default/unknown_4xx"
	idUnknown5xx       = "default/unknown_5xx"
)

// Classify says what a failed (or successful) call means. It is pure: no I/O,
// no clock, no shared state; the same Observation always gives the same
// Verdict. See the package documentation for the rule order.
func Classify(o Observation) Verdict {
	return boundCode(classify(o, 0, nil))
}

// classify is Classify with a depth (for OpenRouter's nested upstream body)
// and an optional trace of the rule IDs that fired, used by the tests.
func classify(o Observation, depth int, trace func(id string)) Verdict {
	fire := func(id string) {
		if trace != nil {
			trace(id)
		}
	}
	switch o.Phase {
	case PhaseNotSent:
		fire(idNotSent)
		return Verdict{Class: Transient, Reason: "not_sent", Known: true}
	case PhaseSentNoResponse:
		fire(idSentNoResponse)
		return Verdict{Class: Ambiguous, Reason: "sent_no_response", Known: true}
	case PhaseStream:
		// The stream started (2xx), so the request ran and may be billed,
		// whatever the error event inside says (even rate_limit or overloaded).
		fire(idStream)
		return Verdict{Class: Ambiguous, Code: strPtr(lastStreamError(o.Body)), Reason: "stream_failed", Known: true}
	case PhaseResponse, "":
	default:
		fire(idUnknownPhase)
		return Verdict{Class: Rejected, Reason: "unknown_phase", Known: false}
	}

	if o.Status < 200 || (o.Status >= 300 && o.Status < 400) || o.Status > 599 {
		// Status 0, 1xx, 3xx or out of range: nothing to go on. Rejected does not
		// resend; known:false raises the unknown-class alert.
		fire(idUnexpectedStatus)
		return Verdict{Class: Rejected, Reason: "unexpected_status", Known: false}
	}

	f := facts{vendor: o.Vendor, path: o.Path, status: o.Status}
	if t, ok := header(o.Headers, "x-amzn-errortype"); ok {
		f.amzType, _, _ = strings.Cut(strings.TrimSpace(t), ":")
	}

	if o.Status < 300 {
		// Cheap test first: a success body may be a megabyte long.
		if strings.Contains(o.Body, "error") {
			f.parseBody(o.Body)
			if f.hasError {
				// OpenRouter: the model started, then failed, and the status line
				// was already sent. Like a broken stream, it may be billed.
				fire(idErrorIn2xx)
				return Verdict{Class: Ambiguous, Code: strPtr(f.defaultCode()), Reason: "error_in_2xx_body", Known: true}
			}
		}
		fire(idOK)
		return Verdict{Class: OK, Reason: "ok", Known: true}
	}

	f.parseBody(o.Body)
	f.hint, f.undated = retryHint(o.Headers, f.retryDelay)

	v, matched := runChain(&f, o, depth, trace)
	if !matched {
		if o.Status < 500 {
			fire(idUnknown4xx)
			v = Verdict{Class: Rejected, Reason: "unknown_4xx", Known: false}
		} else {
			fire(idUnknown5xx)
			v = Verdict{Class: Transient, Reason: "unknown_5xx", Known: false}
		}
	}
	if v.Code == nil {
		v.Code = strPtr(f.defaultCode())
	}
	v = applyShouldRetry(v, o.Headers)

	switch v.Class {
	case Throttled, Transient, Exhausted:
		// Reported for exhausted too, for the record; the reaction for an
		// exhausted key is the breaker and its probe, not this wait.
		if f.hint != nil {
			v.RetryAfterS = f.hint
		}
		if f.undated && v.RetryAfterS == nil {
			v.Reason += "+retry_after_undated"
		}
	default:
		v.RetryAfterS = nil
	}
	return v
}

func runChain(f *facts, o Observation, depth int, trace func(string)) (Verdict, bool) {
	chain, ok := chains[o.Vendor]
	if !ok {
		chain = chains["other"]
	}
	for _, t := range chain {
		for i := range t.rules {
			r := &t.rules[i]
			if !r.when(f) {
				continue
			}
			if r.delegate {
				v, ok := classifyUpstream(f, o, depth, trace)
				if !ok {
					continue
				}
				if trace != nil {
					trace(t.name + "/" + r.reason)
				}
				return v, true
			}
			if trace != nil {
				trace(t.name + "/" + r.reason)
			}
			return Verdict{Class: r.class, Reason: r.reason, Known: !r.unknown}, true
		}
	}
	return Verdict{}, false
}

// classifyUpstream classifies OpenRouter's error.metadata.raw (the upstream
// provider's own body, carried as a string) with that provider's tables. It
// is used only when that gives a specific, known answer.
func classifyUpstream(f *facts, o Observation, depth int, trace func(string)) (Verdict, bool) {
	if depth > 0 {
		return Verdict{}, false
	}
	status := o.Status
	if n, err := strconv.Atoi(f.code); err == nil && n >= 400 && n <= 599 {
		status = n
	}
	up := Observation{Vendor: upstreamVendor(f.metaProvider), Path: PathDirect, Phase: PhaseResponse, Status: status, Body: f.metaRaw}
	v := classify(up, depth+1, trace)
	if !v.Known || v.Class == OK {
		return Verdict{}, false
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

// ruleIDs lists every rule ID Classify can fire, for the fixture-coverage test.
func ruleIDs() []string {
	ids := []string{idNotSent, idSentNoResponse, idStream, idUnknownPhase, idUnexpectedStatus,
		idOK, idErrorIn2xx, idUnknown4xx, idUnknown5xx}
	seen := map[*table]bool{}
	for _, chain := range chains {
		for _, t := range chain {
			if seen[t] {
				continue
			}
			seen[t] = true
			for _, r := range t.rules {
				ids = append(ids, t.name+"/"+r.reason)
			}
		}
	}
	return ids
}
