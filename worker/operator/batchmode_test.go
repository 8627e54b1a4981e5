package operator_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

func TestDescribeProviderBatch(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`{"total":120,"completed":40,"failed":2}`:                             "total 120, completed 40, failed 2",
		`{"failed":0,"completed":3,"total":3}`:                                "total 3, completed 3",
		`{"processing":5,"succeeded":0,"errored":0,"canceled":0,"expired":0}`: "processing 5",
		`{"processing":0,"succeeded":4,"errored":1,"canceled":0,"expired":2}`: "succeeded 4, errored 1, expired 2",
		`{"total":0,"completed":0,"failed":0}`:                                "-",
		`{}`:                                                                  "-",
		``:                                                                    "-",
		`{"total":2,"novel":1}`:                                               "total 2, novel 1",
	} {
		require.Equal(t, want, operator.DescribeCounts(json.RawMessage(raw)), raw)
	}

	for d, want := range map[time.Duration]string{
		45 * time.Second:                "45s",
		12*time.Minute + 30*time.Second: "12m",
		90 * time.Minute:                "1h30m",
		7*time.Hour + 5*time.Minute:     "7h05m",
		23 * time.Hour:                  "23h",
		50 * time.Hour:                  "2d2h",
		72 * time.Hour:                  "3d",
		-5 * time.Minute:                "5m",
	} {
		require.Equal(t, want, operator.RoundAge(d), d.String())
	}

	id, status := "batch_abc", "in_progress"
	exp, past := int64(81000), int64(-300)
	p := ledger.ProviderBatchStatus{ID: 7, State: "submitted", ProviderBatchID: &id, VendorStatus: &status,
		Lines: 120, BatchLines: 40, AgeS: 5400, ExpiresInS: &exp}
	require.Equal(t, "batch_abc", operator.ProviderID(p))
	require.Equal(t, "submitted: in_progress", operator.ProviderState(p))
	require.Equal(t, "40 of 120", operator.ProviderLines(p))
	require.Equal(t, "1h30m", operator.ProviderAge(p))
	require.Equal(t, "22h30m", operator.ProviderExpiresIn(p))
	p.ExpiresInS = &past
	require.Equal(t, "expired 5m ago", operator.ProviderExpiresIn(p))
	p = ledger.ProviderBatchStatus{ID: 7, State: "intent", Lines: 3, BatchLines: 3, CancelRequested: true}
	require.Equal(t, "#7 (not submitted)", operator.ProviderID(p))
	require.Equal(t, "intent, cancel requested", operator.ProviderState(p))
	require.Equal(t, "3", operator.ProviderLines(p))
	require.Equal(t, "-", operator.ProviderExpiresIn(p))

	now := time.Date(2026, 12, 1, 22, 15, 0, 0, time.Local)
	require.Regexp(t, `^2026-12-02 06:00 \S+ \(in 7h45m\)$`, operator.DescribeDeadline(now.Add(7*time.Hour+45*time.Minute), now))
	require.Regexp(t, `^2026-12-01 22:05 \S+ \(passed 10m ago\)$`, operator.DescribeDeadline(now.Add(-10*time.Minute), now))

	abc, xyz := "batch_abc", "msgbatch_xyz"
	require.Equal(t, "batch_abc, msgbatch_xyz (asked before), #3 (not at the provider yet)", operator.CancelNames([]ledger.CancelRequest{
		{ID: 1, ProviderBatchID: &abc}, {ID: 2, ProviderBatchID: &xyz, Already: true}, {ID: 3}}))
}
