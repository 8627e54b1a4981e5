package classify

import (
	"math"
	"net/http"
	"strconv"
	"strings"
)

// header looks a header up case-insensitively without allocating.
func header(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// retryHint reads the wait the response asked for, in seconds. Order:
// retry-after-ms (what the Anthropic and OpenAI SDKs read first), retry-after
// as seconds, retry-after as an HTTP date measured against the response's own
// Date header (the classifier has no clock), then Google RetryInfo.retryDelay.
// undated is true when retry-after was an HTTP date but no usable Date header
// came with it, so no wait could be computed.
func retryHint(h map[string]string, retryDelay string) (secs *float64, undated bool) {
	if v, ok := header(h, "retry-after-ms"); ok {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && finite(ms) && ms >= 0 {
			return ptr(ms / 1000), false
		}
	}
	if v, ok := header(h, "retry-after"); ok {
		v = strings.TrimSpace(v)
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if finite(s) && s >= 0 {
				return ptr(s), false
			}
		} else if at, err := http.ParseTime(v); err == nil {
			d, ok := header(h, "date")
			now, err := http.ParseTime(strings.TrimSpace(d))
			if !ok || err != nil {
				return nil, true
			}
			return ptr(math.Max(0, at.Sub(now).Seconds())), false
		}
	}
	if retryDelay != "" {
		// protobuf Duration JSON: decimal seconds with an "s" suffix ("26s", "1.5s").
		if s, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(retryDelay), "s"), 64); err == nil && finite(s) && s >= 0 {
			return ptr(s), false
		}
	}
	return nil, false
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func ptr[T any](v T) *T { return &v }
