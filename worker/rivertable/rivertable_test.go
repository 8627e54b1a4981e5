package rivertable_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/worker/rivertable"
)

func TestJob(t *testing.T) {
	t.Parallel()
	require.Equal(t, "river_job", rivertable.Job(""))
	require.Equal(t, `"river"."river_job"`, rivertable.Job("river"))
	require.Equal(t, `"odd""name"."river_job"`, rivertable.Job(`odd"name`), "quoted, not injected")
}
