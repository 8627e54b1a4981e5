package config

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAmbiguousPolicy(t *testing.T) {
	t.Parallel()
	withKey := func(extra string) string {
		return strings.Replace(minimal, `api_key_env = "OPENAI_API_KEY"`, `api_key_env = "OPENAI_API_KEY"`+"\n"+extra, 1)
	}
	cfg, err := Parse([]byte(minimal), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, AmbiguousRetry, cfg.Keys[0].Ambiguous, "default keeps today's behaviour")
	require.Equal(t, LookupWaitDefault, cfg.Keys[0].LookupWait)

	cfg, err = Parse([]byte(withKey("ambiguous = \"lookup\"\nlookup_wait = \"5s\"")), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, AmbiguousLookup, cfg.Keys[0].Ambiguous)
	require.Equal(t, 5*time.Second, cfg.Keys[0].LookupWait)

	cfg, err = Parse([]byte(withKey(`ambiguous = "dead_letter"`)), "triage.toml")
	require.NoError(t, err)
	require.Equal(t, AmbiguousDeadLetter, cfg.Keys[0].Ambiguous)

	for _, tc := range []struct{ extra, want string }{
		{`ambiguous = "maybe"`, `triage.toml: keys[0] "main": ambiguous "maybe" is not one of: retry, dead_letter, lookup`},
		{`lookup_wait = "soon"`, `lookup_wait "soon"`},
		{`lookup_wait = "-1s"`, `lookup_wait "-1s": must be positive`},
	} {
		_, err := Parse([]byte(withKey(tc.extra)), "triage.toml")
		require.ErrorContains(t, err, tc.want, tc.extra)
	}
	anthropic := strings.Replace(withKey(`ambiguous = "lookup"`), `vendor = "openai"`, `vendor = "anthropic"`, 1)
	_, err = Parse([]byte(anthropic), "triage.toml")
	require.ErrorContains(t, err, `ambiguous = "lookup" needs a vendor that can find a call by its idempotency key (openai); vendor "anthropic" has no look-up`)
	groq := strings.Replace(withKey(`ambiguous = "lookup"`), `vendor = "openai"`, `vendor = "groq"`, 1)
	_, err = Parse([]byte(groq), "triage.toml")
	require.ErrorContains(t, err, `vendor "groq" has no look-up`)
}
