package jobrun

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCacheKey(t *testing.T) {
	t.Parallel()
	k := cacheKey("openai", "abc")
	require.Len(t, k, 64)
	require.Equal(t, k, cacheKey("openai", "abc"), "stable")
	require.NotEqual(t, k, cacheKey("anthropic", "abc"), "the vendor is part of it")
	require.NotEqual(t, k, cacheKey("openai", "abd"), "the request is part of it")
	require.NotEqual(t, cacheKey("ab", "c"), cacheKey("a", "bc"), "no collision by concatenation")
}
