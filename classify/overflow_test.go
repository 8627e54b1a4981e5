package classify

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContextOverflowCounts pins the counts read from each context-length
// fixture, and that the forms without numbers say so.
func TestContextOverflowCounts(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]struct {
		ov Overflow
		ok bool
	}{
		"openai/context_length_exceeded_400.json":     {Overflow{Limit: 4097, Input: 4294}, true},
		"anthropic/prompt_too_long_400.json":          {Overflow{Limit: 200000, Input: 208310}, true},
		"anthropic/context_limit_max_tokens_400.json": {Overflow{Limit: 200000, Input: 178959, Output: 64000}, true},
		"vllm/context_length_400.json":                {Overflow{Limit: 10000, Input: 2323, Output: 8192}, true},
		"anthropic/context_window_413.json":           {Overflow{}, false},
		"bedrock/input_too_long_400.json":             {Overflow{}, false},
		"../testdata/holdout/050_deepseek_400.json":   {Overflow{Limit: 131072, Input: 122942, Output: 8192}, true},
		"../testdata/corpus/049_openai_400.json":      {Overflow{Limit: 4096, Input: 3118, Output: 1000}, true},
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			var fx struct {
				Observation Observation `json:"observation"`
			}
			b, err := os.ReadFile(filepath.Join("testdata", file))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &fx))
			require.Equal(t, "context_length", Classify(fx.Observation).Reason)
			ov, ok := ContextOverflow(fx.Observation)
			require.Equal(t, want.ok, ok)
			require.Equal(t, want.ov, ov)
			require.Equal(t, want.ok, ov.Known())
		})
	}
}

func TestContextOverflowVariants(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]Overflow{
		// The older completions form, and Anthropic's message wrapped.
		"This model's maximum context length is 8191 tokens, however you requested 8238 tokens (8238 in your prompt; 0 for the completion).": {Limit: 8191, Input: 8238},
		"input length and `max_tokens` exceed context limit: 184915 +\n20000 > 204648":                                                       {Limit: 204648, Input: 184915, Output: 20000},
		"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).":                                            {Limit: 1048576, Input: 1200000},
		"This endpoint's maximum context length is 163840 tokens. However, you requested about 200120 tokens":                                {Limit: 163840, Input: 200120},
	} {
		ov, ok := ContextOverflow(Observation{Body: body})
		require.True(t, ok, body)
		require.Equal(t, want, ov, body)
	}
}
