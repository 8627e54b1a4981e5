package jobrun

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestRetryUnreachableRetriesOnlyAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a stopping run still gets its answer stored
	tries, retried := 0, 0
	err := retryUnreachable(ctx, time.Minute, func(int, error) { retried++ }, func(ctx context.Context) error {
		require.NoError(t, ctx.Err())
		tries++
		if tries < 3 {
			return fmt.Errorf("complete: commit: %w", syscall.EPIPE)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, tries)
	require.Equal(t, 2, retried)

	tries = 0
	refused := &pgconn.PgError{Code: "23505"}
	err = retryUnreachable(context.Background(), time.Minute, nil, func(context.Context) error { tries++; return refused })
	require.ErrorIs(t, err, refused)
	require.Equal(t, 1, tries, "a statement the server refused is not retried")

	tries = 0
	down := errors.New("failed to connect: dial error: connection reset by peer")
	err = retryUnreachable(context.Background(), 300*time.Millisecond, nil, func(context.Context) error { tries++; return down })
	require.ErrorIs(t, err, down, "bounded: the last error once the bound passes")
	require.Greater(t, tries, 1)
}
