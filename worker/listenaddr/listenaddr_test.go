package listenaddr_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/listenaddr"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, loopback := range map[string]bool{
		"127.0.0.1:9090": true, "[::1]:0": true, "localhost:80": true, "LOCALHOST:80": true,
		":9464": false, "0.0.0.0:9090": false, "10.0.0.5:9090": false, "metrics.internal:9090": false,
	} {
		a, err := listenaddr.Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, loopback, a.Loopback, in)
	}
	for _, in := range []string{"9090", "localhost", "127.0.0.1:http", "127.0.0.1:70000", "bad host:1", "-x:1", "[::1:80", ""} {
		_, err := listenaddr.Parse(in)
		require.ErrorIs(t, err, listenaddr.ErrInvalid, in)
	}
}

func TestListenWarnsBeyondLoopback(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ln, a, err := listenaddr.Listen(context.Background(), "127.0.0.1:0", "metrics", log)
	require.NoError(t, err)
	require.True(t, a.Loopback)
	ln.Close()
	require.Empty(t, buf.String(), "loopback is quiet")

	ln, _, err = listenaddr.Listen(context.Background(), ":0", "metrics", log)
	require.NoError(t, err)
	ln.Close()
	require.Contains(t, buf.String(), "metrics listen beyond loopback")
	require.Contains(t, buf.String(), "every interface")
}
