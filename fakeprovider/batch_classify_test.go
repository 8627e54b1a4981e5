package fakeprovider_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
)

// anthropicErrorStatus is the HTTP status Anthropic documents for each
// error.type (docs.claude.com/en/api/errors). An errored batch result carries
// the envelope but no status, so the submitter puts this one in the
// Observation.
var anthropicErrorStatus = map[string]int{
	"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
	"permission_error": 403, "not_found_error": 404, "request_too_large": 413,
	"rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}

// batchObservation runs one line the scenario answers with step and builds
// the Observation the submitter will: phase response, the line's status and
// body (OpenAI: response.status_code and response.body; Anthropic: the errored
// envelope with the status its error.type stands for, or 200 and the message).
func batchObservation(t *testing.T, vendor string, step fakeprovider.Step) classify.Observation {
	t.Helper()
	b := setup(t, fakeprovider.Scenario{Script: []fakeprovider.Step{step}})
	ctx := ctxT(t)
	obs := classify.Observation{Vendor: vendor, Path: classify.PathDirect, Phase: classify.PhaseResponse}
	if vendor == "openai" {
		batch := b.oaGet(t, ctx, b.oaSubmit(t, ctx, oaBatchFile([]string{"a"}, prompt)).ID)
		require.Equal(t, openai.BatchStatusCompleted, batch.Status)
		lines := append(b.oaFile(t, ctx, batch.OutputFileID), b.oaFile(t, ctx, batch.ErrorFileID)...)
		require.Len(t, lines, 1)
		obs.Status, obs.Body = lines[0].Response.StatusCode, string(lines[0].Response.Body)
		return obs
	}
	batch, err := b.anth.Messages.Batches.New(ctx, anBatchParams([]string{"a"}, prompt))
	require.NoError(t, err)
	res := b.anResults(t, ctx, batch.ID)
	require.Len(t, res, 1)
	switch r := res[0].Result; r.Type {
	case "succeeded":
		obs.Status, obs.Body = 200, r.AsSucceeded().Message.RawJSON()
	case "errored":
		env := r.AsErrored().Error
		obs.Status, obs.Body = anthropicErrorStatus[env.Error.Type], env.RawJSON()
		var probe struct{ Type, RequestID string }
		require.NoError(t, json.Unmarshal([]byte(obs.Body), &probe))
		require.Equal(t, "error", probe.Type)
	default:
		t.Fatalf("unexpected result type %q", r.Type)
	}
	return obs
}

// A failed batch line must mean what the same failure means on a synchronous
// call: the classifier sees the same body, so the worker can react per line
// with the reactions it already has. Transport faults (hang, cut stream) have
// no batch form; a line that draws one fails as the vendor's server error.
func TestBatchLineFailuresClassifyLikeSyncCalls(t *testing.T) {
	t.Parallel()
	actions := []fakeprovider.Action{
		fakeprovider.ActionOK, fakeprovider.ActionRateLimit, fakeprovider.ActionTooLarge, fakeprovider.ActionExhausted,
		fakeprovider.ActionOverloaded, fakeprovider.ActionServerError, fakeprovider.ActionContextLength,
		fakeprovider.ActionInvalidParam, fakeprovider.ActionPolicy,
	}
	for _, vendor := range vendors {
		for _, a := range actions {
			t.Run(vendor+"/"+string(a), func(t *testing.T) {
				t.Parallel()
				step := fakeprovider.Step{Action: a}
				sync := classify.Classify(observe(t, vendor, step, false))
				got := classify.Classify(batchObservation(t, vendor, step))
				require.Equal(t, sync.Class, got.Class, "sync %+v batch %+v", sync, got)
				require.Equal(t, sync.Reason, got.Reason)
				require.True(t, got.Known)
			})
		}
		t.Run(vendor+"/hang", func(t *testing.T) {
			t.Parallel()
			got := classify.Classify(batchObservation(t, vendor, fakeprovider.Step{Action: fakeprovider.ActionHang}))
			require.Equal(t, classify.Transient, got.Class)
		})
	}
}
