package console_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/console"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr, token string
		needsToken  bool
	}{
		{"127.0.0.1:8080", "", false},
		{"localhost:8080", "", false},
		{"[::1]:8080", "", false},
		{"127.0.0.2:0", "", false},
		{"0.0.0.0:8080", "", true},
		{":8080", "", true},
		{"10.1.2.3:8080", "", true},
		{"example.com:8080", "", true},
		{"0.0.0.0:8080", "t", false},
	} {
		err := console.CheckAddr(c.addr, c.token)
		require.Equal(t, c.needsToken, errors.Is(err, console.ErrTokenRequired), "%s token %q: %v", c.addr, c.token, err)
		if !c.needsToken {
			require.NoError(t, err, c.addr)
		}
	}
	require.Error(t, console.CheckAddr("8080", ""), "no host:port")
}
