package decide

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
)

func TestFitCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 2000) // 10,000 characters
	record := map[string]any{"id": "r1", "body": long, "title": "short", "tags": []any{"a", strings.Repeat("x", 300)}}
	prompt := 10_400

	// OpenAI: "maximum context length is 2000 tokens. However, your
	// messages resulted in 2600 tokens" with max_tokens 256.
	cut := FitCut(record, prompt, classify.Overflow{Limit: 2000, Input: 2600}, 0, 256)
	require.Positive(t, cut)
	// The cut removes at least the excess: (2600-1744) tokens at 4 chars.
	require.LessOrEqual(t, cut, 10_000-856*4)
	truncated := truncateStrings(record, cut).(map[string]any)
	require.Equal(t, "short", truncated["title"], "short fields are left alone")
	require.Len(t, truncated["body"], cut)

	// The model's context_tokens is used when smaller than the vendor's,
	// and is the only limit when the message gives no numbers.
	require.Less(t, FitCut(map[string]any{"b": long}, prompt, classify.Overflow{Limit: 2000, Input: 2600}, 1500, 256), cut)
	require.Positive(t, FitCut(map[string]any{"b": long}, prompt, classify.Overflow{}, 2000, 256))
	// Nothing to go by, or nothing long enough to cut: no retry.
	require.Zero(t, FitCut(map[string]any{"b": long}, prompt, classify.Overflow{}, 0, 256))
	require.Zero(t, FitCut(map[string]any{"n": 12.5, "b": "tiny"}, prompt, classify.Overflow{Limit: 2000, Input: 2600}, 0, 256))
}

func TestWaterLevel(t *testing.T) {
	t.Parallel()
	require.Equal(t, 70, waterLevel([]int{100, 50}, 30))
	require.Equal(t, 40, waterLevel([]int{100, 50}, 70)) // 60 + 10
	require.Equal(t, 0, waterLevel([]int{100, 50}, 150))
	require.Equal(t, 0, waterLevel(nil, 1))
}
