package redact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/redact"
)

// canary is not key-shaped: only the exact match can catch it.
const canary = "CANARYq7Zp0x9mWv3LtK"

func TestBoundaryRemovesTheExactKey(t *testing.T) {
	t.Parallel()
	b := redact.New(canary)
	for _, in := range []string{
		canary,
		"code " + canary + " end",
		`{"error":{"code":"` + canary + `"}}`,
		"?token=" + canary,
		"x" + canary + canary + "y",
	} {
		for _, f := range []func(string) string{b.Field, b.Excerpt, b.Secrets, b.Exact} {
			require.NotContains(t, f(in), canary[:8], in)
		}
	}
}

func TestBoundaryRemovesACutOffKeyAtTheEnd(t *testing.T) {
	t.Parallel()
	b := redact.New(canary)
	// A value someone else bounded mid-key.
	require.Equal(t, "code "+redact.Marker, b.Field("code "+canary[:12]))
	// Text that only starts like the key, inside a string, is kept.
	require.Equal(t, "x "+canary[:12]+"- y", b.Field("x "+canary[:12]+"- y"))
}

func TestAPIKeyFieldRedactedOnce(t *testing.T) {
	t.Parallel()
	// The slip of the old redactor: "api_key=[REDACTED] api key]".
	got := redact.New("opaque-secret-value").Excerpt("bad api_key=opaque-secret-value given")
	require.Equal(t, "bad api_key=[REDACTED] given", got)
	require.Equal(t, got, redact.New("opaque-secret-value").Excerpt(got), "redacting twice changes nothing")
}

func TestKeyShapedTokensRemovedWithoutTheKey(t *testing.T) {
	t.Parallel()
	var b redact.Boundary
	for _, in := range []string{
		"Incorrect API key provided: sk-proj-AbCdEf123456_ghIJ.",
		"Authorization: Bearer abc.def.ghi-123456",
		"x-api-key: secretvalue123",
		"https://x/v1?key=AIzaSyA1234567890abcdefghijklmnop&alt=json",
		"gsk_abcdefghijklmnopqrstuvwxyz0123",
	} {
		got := b.Excerpt(in)
		require.Contains(t, got, redact.Marker, in)
		for _, secret := range []string{"sk-proj-AbCd", "abc.def", "secretvalue123", "AIzaSy", "gsk_abc"} {
			require.NotContains(t, got, secret)
		}
	}
}

func TestFieldEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	var b redact.Boundary
	got := b.Field("a\x1b[2Jb\nc\rd\x00e\u202ef\u009b\xff")
	require.Equal(t, `a\x1b[2Jb\nc\rd\x00e\u202ef\u009b\xff`, got)
	require.Equal(t, "line 1\nline\t2 \\x1b", b.Excerpt("line 1\nline\t2 \x1b"))
	require.Equal(t, `tab\there`, redact.Escape("tab\there", false))
	require.True(t, redact.HasControl("a\x00"))
	require.True(t, redact.HasControl("a\u0085"))
	require.False(t, redact.HasControl("plain é"))
}

func TestBoundsLengthOnARuneBoundaryAfterRedacting(t *testing.T) {
	t.Parallel()
	b := redact.New(canary)
	long := strings.Repeat("é", 400)
	got := b.Excerpt(long)
	require.True(t, utf8.ValidString(got))
	require.Equal(t, strings.Repeat("é", 250)+"…", got)
	require.LessOrEqual(t, len(b.Field(strings.Repeat("x", 10000))), redact.FieldMaxBytes+len("…"))

	// A key right at the cut, and a body of keys: nothing of them survives
	// the window the redactor reads.
	for _, n := range []int{redact.FieldMaxBytes - 5, 2*redact.FieldMaxBytes + 500, 1020, 1030} {
		in := strings.Repeat("x", n) + " " + canary + " sk-proj-0123456789abcdef " + strings.Repeat("y", 5000)
		require.NotContains(t, b.Field(in), canary[:6])
		require.NotContains(t, b.Field(in), "sk-")
	}
	keys := strings.Repeat(canary+" ", 2000)
	require.NotContains(t, b.Excerpt(keys), canary[:6])
}

func FuzzBoundary(f *testing.F) {
	f.Add("code "+canary, 3)
	f.Add("\x1b]0;title\x07", 0)
	f.Fuzz(func(t *testing.T, s string, pad int) {
		pad = max(0, min(pad, 3000))
		in := strings.Repeat("z", pad) + s + canary + s
		b := redact.New(canary)
		for _, out := range []string{b.Field(in), b.Excerpt(in)} {
			require.NotContains(t, out, canary)
			require.False(t, strings.ContainsAny(out, "\x00\x1b\r"))
			require.LessOrEqual(t, len(out), redact.ExcerptMaxBytes+len("…"))
		}
	})
}

// Every rule's match holds a trigger: the prefilter never skips a secret
// the rules would have removed.
func TestTriggersCoverTheRules(t *testing.T) {
	t.Parallel()
	var b redact.Boundary
	for _, in := range []string{
		"Authorization: Token abcdefgh12", "authorization=xyz", "BEARER abcdefghijkl", "Basic dXNlcjpwYXNzd29yZA==",
		"X-Api-Key: v", "x-goog-api-key=v", "APIKEY: v", "Api_Key=v", "access_token: v", "accessToken=v", "Access-Token: v",
		"secret_key=v", "client-secret: v", "PASSWORD=v", "u?key=v", "u&token=v", "u?sig=v",
		"sk-abcdef", "rk-abcdef", "pk-abcdef", "sk_live_abcdef", "pk_test_abcdef",
		"gsk_abcdefghijklmnop", "xai-abcdefghijklmnop", "hf_abcdefghijklmnop", "nvapi-abcdefghijklmnop", "r8_abcdefghijklmnop",
		"AIzaSyA1234567890abcdefghij", "AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE",
	} {
		require.Contains(t, b.Field(in), redact.Marker, in)
	}
	require.Equal(t, `{"usage":{"prompt_tokens":3,"completion_tokens":5}}`, b.Field(`{"usage":{"prompt_tokens":3,"completion_tokens":5}}`))
}
