package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/workertest"
)

// webhookEvents decodes the batch_* events the receiver got, in order (the
// rejected record's unknown_error alert is not this test's business).
func webhookEvents(t *testing.T, hook *workertest.Webhook) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(hook.All()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if strings.HasPrefix(m["kind"].(string), "batch_") {
			out = append(out, m)
		}
	}
	return out
}

func webhookKinds(events []map[string]any) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev["kind"].(string)
	}
	return out
}

// The [alerts] webhook hears when a batch settles (its counts and spend),
// and when a person pauses, resumes or cancels one, each once.
func TestWebhookOnBatchSettledPausedCancelled(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{Poison: fakeprovider.Poison{InvalidMarker: "POISON"}}, "")
	var hook workertest.Webhook
	srv := httptest.NewServer(&hook)
	t.Cleanup(srv.Close)
	b, err := os.ReadFile(c.config)
	require.NoError(t, err)
	require.NotContains(t, string(b), "[alerts]")
	require.NoError(t, os.WriteFile(c.config, append(b, []byte("\n[alerts]\nwebhook_url = \""+srv.URL+"\"\n")...), 0o600))

	// A run: one record rejected, two completed.
	input := jsonl(2) + `{"id":"bad","text":"POISON"}` + "\n"
	r := c.run(input, "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	events := webhookEvents(t, &hook)
	require.Equal(t, []string{"batch_settled"}, webhookKinds(events), hook.All())
	ev := events[0]
	require.Equal(t, "b1", ev["batch"])
	require.Equal(t, "main", ev["key"])
	fields := ev["fields"].(map[string]any)
	require.EqualValues(t, 3, fields["total"])
	require.EqualValues(t, 2, fields["completed"])
	require.EqualValues(t, 1, fields["dead_lettered"])
	require.EqualValues(t, 3, fields["calls"])
	require.Greater(t, fields["spend_usd"].(float64), 0.0)
	require.Equal(t, false, fields["cancelled_by_hand"])
	require.Contains(t, ev["message"], "2 of 3 records completed, 1 dead-lettered")

	// A person's actions on a second batch, which no worker runs.
	r = c.run(jsonl(3), "enqueue", "--pipeline", "enrich", "--batch", "b2", "-")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, sub := range []string{"pause", "pause", "resume", "cancel"} {
		r = c.run("", "batch", sub, "b2")
		require.Equal(t, exitOK, r.code, r.stderr)
	}
	events = webhookEvents(t, &hook)
	require.Equal(t, []string{"batch_settled", "batch_paused", "batch_resumed", "batch_cancelled", "batch_settled"},
		webhookKinds(events), "a pause of a paused batch changes nothing and says nothing; a cancel with nothing in flight settles it:\n%s", hook.All())
	for _, ev := range events[1:4] {
		require.Equal(t, "b2", ev["batch"])
		require.Equal(t, "hand", ev["fields"].(map[string]any)["by"])
	}
	fields = events[4]["fields"].(map[string]any)
	require.Equal(t, "b2", events[4]["batch"])
	require.Equal(t, true, fields["cancelled_by_hand"])
	require.EqualValues(t, 3, fields["dead_lettered"])
	require.EqualValues(t, 0, fields["calls"])

	// Requeued, b1 runs again and its next settle is announced anew.
	r = c.run("", "dlq", "requeue", "--batch", "b1")
	require.Equal(t, exitOK, r.code, r.stderr)
	stop := dlqStartWorker(t, c)
	dlqWaitSettled(t, c, "b1", 30*time.Second)
	stop()
	events = webhookEvents(t, &hook)
	require.Equal(t, "batch_settled", events[len(events)-1]["kind"], hook.All())
	require.Equal(t, 3, hook.Count("batch_settled"), hook.All())
}
