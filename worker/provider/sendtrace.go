package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
)

// SendTrace records how far a request got, from httptrace callbacks that run
// on the Transport's goroutines, so that a failed round trip can be told
// not_sent from sent_no_response. Every HTTP call to a provider uses it: the
// synchronous calls here and the Batch API calls of worker/batchapi, so both
// draw the line between "never sent" and "may have run" in the same place.
// The zero value is ready to use.
type SendTrace struct {
	mu           sync.Mutex
	wroteHeaders bool
	wroteDone    bool
	wroteErr     error
}

// ClientTrace is the trace to install with httptrace.WithClientTrace.
func (t *SendTrace) ClientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		WroteHeaders: func() {
			t.mu.Lock()
			t.wroteHeaders = true
			t.mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			t.mu.Lock()
			t.wroteDone, t.wroteErr = true, info.Err
			t.mu.Unlock()
		},
	}
}

// MaybeWritten reports whether the server may have received the whole
// request. It is false only when the headers were never written or the write
// reported an error. When the headers went out and the body write had not yet
// reported (the call ended while the write was finishing), it answers true:
// calling a sent request unsent risks paying twice, the other mistake costs
// one ambiguous retry.
func (t *SendTrace) MaybeWritten() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.wroteHeaders {
		return false
	}
	if t.wroteDone {
		return t.wroteErr == nil
	}
	return true
}

// NetworkError describes a failed round trip for a person: the error below
// net/http's *url.Error (which would repeat the whole URL, query and all)
// and the host it was trying to reach.
func NetworkError(err error, host string) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = "no answer within the key's timeout"
	case errors.Is(err, context.Canceled):
		msg = "the call was cancelled"
	}
	return msg + " (host " + host + ")"
}

// LowerHeaders is the form Observation.Headers takes: lower-cased names,
// repeated values joined with ", ".
func LowerHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		out[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return out
}
