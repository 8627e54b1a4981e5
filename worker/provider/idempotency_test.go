package provider

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	r := baseRequest()
	h := RequestHash(r)
	k := IdempotencyKey("b1", "r1", "enrich", h)
	require.Regexp(t, `^triage-[0-9a-f]{40}$`, k)
	require.Equal(t, k, IdempotencyKey("b1", "r1", "enrich", RequestHash(r)), "stable across retries")

	// Headers-only fields do not change the request hash.
	r2 := r
	r2.IdempotencyKey, r2.RecordID = "other", "other"
	require.Equal(t, h, RequestHash(r2))

	// Any change to what is asked does.
	temp := 0.9
	for name, mutate := range map[string]func(*Request){
		"model":       func(r *Request) { r.Model = "gpt-4o" },
		"system":      func(r *Request) { r.System = "" },
		"prompt":      func(r *Request) { r.Prompt += " " },
		"max tokens":  func(r *Request) { r.MaxTokens++ },
		"temperature": func(r *Request) { r.Temperature = &temp },
		"no temp":     func(r *Request) { r.Temperature = nil },
		"json":        func(r *Request) { r.JSON = false },
		"stream":      func(r *Request) { r.Stream = true },
	} {
		c := r
		mutate(&c)
		require.NotEqual(t, h, RequestHash(c), name)
		require.NotEqual(t, k, IdempotencyKey("b1", "r1", "enrich", RequestHash(c)), name)
	}

	// Each identity part matters, and parts cannot run into each other.
	require.NotEqual(t, k, IdempotencyKey("b2", "r1", "enrich", h))
	require.NotEqual(t, k, IdempotencyKey("b1", "r2", "enrich", h))
	require.NotEqual(t, k, IdempotencyKey("b1", "r1", "enrich2", h))
	require.NotEqual(t, IdempotencyKey("ab", "c", "p", h), IdempotencyKey("a", "bc", "p", h))
}
