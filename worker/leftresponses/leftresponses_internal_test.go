package leftresponses

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/service/servicetest"
)

// TestLeftStepOf pins what the pass over left background responses does
// with each answer to a fetch or a cancel.
func TestLeftStepOf(t *testing.T) {
	t.Parallel()
	answer := func(status int, responseStatus string) provider.Result {
		return provider.Result{Observation: classify.Observation{Phase: classify.PhaseResponse, Status: status},
			ResponseID: "resp_1", ResponseStatus: responseStatus}
	}
	for _, tc := range []struct {
		name string
		res  provider.Result
		want leftStep
	}{
		{"network", provider.Result{Observation: classify.Observation{Phase: classify.PhaseNotSent}, NetworkError: "reset"}, leftLater},
		{"throttled", answer(429, ""), leftLater},
		{"server error", answer(503, ""), leftLater},
		{"not found", answer(404, ""), leftStuck},
		{"key revoked", answer(401, ""), leftStuck},
		{"not a response", answer(200, ""), leftStuck},
		{"queued", answer(200, "queued"), leftLater},
		{"in progress", answer(200, "in_progress"), leftLater},
		{"cancelled", answer(200, "cancelled"), leftCancelled},
		{"completed", answer(200, "completed"), leftEnded},
		{"failed", answer(200, "failed"), leftEnded},
		{"incomplete", answer(200, "incomplete"), leftEnded},
	} {
		require.Equal(t, tc.want, leftStepOf(tc.res), tc.name)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Pool: &pgxpool.Pool{}, Config: &config.Config{}}
	servicetest.RequiredFields(t, ok, New, "Pool", "Config")
	ok.Clients = map[string]Client{"k": nil}
	servicetest.Refused(t, New, ok, `Config.Clients["k"] is nil`)
}
