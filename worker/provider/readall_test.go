package provider_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/provider"
)

// readAll reads what io.ReadAll reads, whatever the announced length says
// (right, too short, too long, unknown), and returns a read error with
// what came before it.
func TestReadAllReadsWhatIOReadAllReads(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 511, 512, 513, 700, 4096, 100_000} {
		body := strings.Repeat("x", n)
		for _, hint := range []int64{-1, 0, int64(n), int64(n) - 1, int64(n) + 1, int64(n) / 2, int64(n) * 3} {
			for name, mk := range map[string]func() io.Reader{
				"plain":    func() io.Reader { return strings.NewReader(body) },
				"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
				"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
			} {
				got, err := provider.ReadAll(mk(), hint)
				require.NoError(t, err, "%s n=%d hint=%d", name, n, hint)
				require.Equal(t, body, string(got), "%s n=%d hint=%d", name, n, hint)
			}
		}
	}
	got, err := provider.ReadAll(iotest.TimeoutReader(iotest.OneByteReader(bytes.NewReader([]byte("ab")))), 2)
	require.ErrorIs(t, err, iotest.ErrTimeout)
	require.Equal(t, "a", string(got))
}
