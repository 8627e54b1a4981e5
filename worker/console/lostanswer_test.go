package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/workertest"
)

// A call that hung after the provider billed it (a 3 s timeout: with
// 300 ms the other records' calls also timed out in a clean-clone CI run,
// and two dead letters were listed where one was expected), with ambiguous =
// "dead_letter": the dead letter's page says, on the call, that its answer
// was lost and the record dead-lettered rather than the call resent, and
// the batch's page counts the lost answers by resolution (HTML and JSON).
func TestPagesShowHowALostAnswerWasResolved(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{scenario: fakeprovider.Scenario{NoReplay: true,
		RecordScripts: map[string][]fakeprovider.Step{"r002": {{Action: fakeprovider.ActionHang}}}},
		timeout: "3s", extraKey: "ambiguous = \"dead_letter\"\n"})
	b.enqueue(t, "b1", workertest.Records(3, nil))
	b.work(t, "b1")

	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(b.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		return string(body)
	}
	dls, err := ledger.ListDeadLetters(context.Background(), b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
	require.NoError(t, err)
	require.Len(t, dls, 1)

	var detail struct {
		Calls []struct {
			Status     string `json:"status"`
			Resolution string `json:"resolution"`
		} `json:"calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(get(fmt.Sprintf("/dead-letters/%d?format=json", dls[0].ID))), &detail))
	require.Len(t, detail.Calls, 1)
	require.Equal(t, "possibly_billed", detail.Calls[0].Status)
	require.Equal(t, "dead_lettered", detail.Calls[0].Resolution)
	page := get(fmt.Sprintf("/dead-letters/%d", dls[0].ID))
	require.Contains(t, page, `<th>Lost answer</th>`)
	require.Contains(t, page, `<td class="resolution" data-resolution="dead_lettered">dead-lettered, not resent</td>`)

	var now struct {
		LostAnswers map[string]int `json:"lost_answers"`
	}
	require.NoError(t, json.Unmarshal([]byte(get("/batches/b1?format=json")), &now))
	require.Equal(t, map[string]int{"found": 0, "resent": 0, "dead_lettered": 1, "unknown": 0}, now.LostAnswers)
	require.Contains(t, get("/batches/b1"), `<dd id="lost-answers">1: 0 found by look-up, 0 resent, 1 dead-lettered, 0 still unknown`)
}
