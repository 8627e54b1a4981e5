package jobrun

import (
	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/provider"
)

// observe is where a provider's answer enters the worker, and the one place
// its text is made safe (one boundary for untrusted text): everything downstream — logs, River's
// errors, the ledger, dead letters, alerts, metrics — reads only what this
// returns.
//
// The key itself is removed before the classifier reads the body, so a code
// or type that echoes it can never carry it out; the classifier bounds the
// code to a safe slug; afterwards code, reason and headers are fields and
// the body an excerpt of the key's redact.Boundary (key-shaped tokens out,
// control characters escaped, length bounded). The model's answer
// (Content) is the record's output and is left alone.
//
// When no response arrived, the excerpt is the network error and the host,
// so a dead letter says what failed where.
func (k *Key) observe(res provider.Result, classifier *classify.Classifier) (provider.Result, classify.Verdict) {
	b := k.redact
	o := &res.Observation
	o.Body = b.Exact(o.Body)
	for name, v := range o.Headers {
		o.Headers[name] = b.Exact(v)
	}
	v := classifier.Classify(*o)
	if v.Code != nil {
		code := b.Field(*v.Code)
		v.Code = &code
	}
	v.Reason = b.Field(v.Reason)
	if o.Body == "" && res.NetworkError != "" {
		o.Body = res.NetworkError
	}
	o.Body = b.Excerpt(o.Body)
	o.Headers = b.Headers(o.Headers)
	res.Malformed = b.Field(res.Malformed)
	res.NetworkError = b.Field(res.NetworkError)
	return res, v
}
