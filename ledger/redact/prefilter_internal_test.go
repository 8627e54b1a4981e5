package redact

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The in-place ASCII scan of mayHoldSecret says what the lower-cased copy
// said, for every trigger at every position and in any case, and for text
// that is not ASCII (a KELVIN SIGN lower-cases to k).
func TestMayHoldSecretAgreesWithTheLowerCasedCopy(t *testing.T) {
	t.Parallel()
	inputs := []string{
		"", "a", "hello world", `{"usage":{"prompt_tokens":3,"completion_tokens":5}}`,
		"x-ratelimit-remaining-requests", "Content-Type", "application/json; charset=utf-8",
		"API_\u212AEY=v", "api_\u212Aey=v", "\u212Aey=v", "caf\u00e9 sk-abcdef", "\u00e9t\u00e9",
		"SK", "S", "toke", "token", "token=", "TOKEN=", "sig", "Sig=1",
	}
	for _, tr := range triggers {
		inputs = append(inputs, tr, strings.ToUpper(tr), "xx"+tr, "xx"+strings.ToUpper(tr)+"yy", tr[:len(tr)-1],
			"answer: "+strings.ToUpper(tr[:1])+tr[1:]+" end")
	}
	for _, in := range inputs {
		require.Equal(t, mayHoldSecretFolded(in), mayHoldSecret(in), "%q", in)
	}
}

func BenchmarkMayHoldSecret(b *testing.B) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"{\"label\":\"Positive\",\"Reason\":\"The Customer Was Happy\"}"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":12,"total_tokens":43}}`
	for b.Loop() {
		mayHoldSecret(body)
		mayHoldSecret("X-Ratelimit-Remaining-Requests")
	}
}

func BenchmarkMayHoldSecretFolded(b *testing.B) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"{\"label\":\"Positive\",\"Reason\":\"The Customer Was Happy\"}"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":12,"total_tokens":43}}`
	for b.Loop() {
		mayHoldSecretFolded(body)
		mayHoldSecretFolded("X-Ratelimit-Remaining-Requests")
	}
}
