package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/keys"
)

// TestUnknownErrorAlertForStatusDecidedRequestError: a 400
// invalid_request_error no vendor row knows is rejected by the status table
// (known:true, decided_by status). The record is dead-lettered as before,
// and the operator gets the unknown-error alert, once, so a body worth a
// pinned rule does not go by unseen.
func TestUnknownErrorAlertForStatusDecidedRequestError(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{
		"r002": steps(act(fakeprovider.ActionInvalidParam)),
		"r004": steps(act(fakeprovider.ActionInvalidParam)),
	}}, tweaks{})
	b.enqueue(t, "b1", records(5, nil))
	b.start(t)

	st := b.waitSettled(t, "b1", 30*time.Second)
	require.Equal(t, 3, st.Completed)
	require.Equal(t, 2, st.DeadLettered)
	eventually(t, 10*time.Second, "the unknown-error alert reaches the webhook", func() bool {
		return b.hooks.count(string(keys.AlertUnknownError)) > 0
	})
	require.Equal(t, 1, b.hooks.count(string(keys.AlertUnknownError)), "one alert for one unknown body, not one per record: %s", b.hooks.all())
	require.Contains(t, b.hooks.all(), `"decided_by":"status"`)
}
