package worker_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/workertest"
)

// TestJSONSchemaRefusedRetriedWithout: an endpoint that refuses
// response_format json_schema gets the request once more without it (the
// json_mode_refused change), and the answer is still checked against the
// schema: an answer that follows it completes, one that breaks it is
// dead-lettered as invalid_output naming the rule.
func TestJSONSchemaRefusedRetriedWithout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema string
		completed    int
	}{
		// The fake's plain JSON answer ({id, label, score, digest}) follows
		// the first schema and breaks the second (its digest).
		{"follows", `{"type":"object","properties":{"label":{"type":"string"},"score":{"type":"number"}},"required":["label","score"]}`, 2},
		{"breaks", `{"type":"object","properties":{"id":{"type":"string"},"label":{"type":"string"},"score":{"type":"number"}},"required":["label","score"],"additionalProperties":false}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := fakeprovider.New(fakeprovider.Scenario{NoReplay: true, APIKey: workertest.APIKey})
			var refused atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte(`"json_schema"`)) {
					refused.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, `{"error":{"message":"Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.","type":"invalid_request_error","param":null,"code":null}}`)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				fake.ServeHTTP(w, r)
			}))
			t.Cleanup(func() { fake.Close(); srv.Close() })
			schema := filepath.Join(t.TempDir(), "schema.json")
			require.NoError(t, os.WriteFile(schema, []byte(tc.schema), 0o600))
			b := &testBundle{db: dbtest.New(t, dbtest.Options{MaxConns: 60}), hooks: hooks{&workertest.Webhook{}}, fake: fake}
			toml := workertest.Config(workertest.ConfigOptions{BaseURL: srv.URL + "/v1", MaxAttempts: 6, Output: "json_schema",
				ExtraPipeline: "schema_file = \"" + schema + "\"\n"})
			cfg, err := config.Parse([]byte(toml), "test.toml")
			require.NoError(t, err)
			b.cfg, b.tomlText, b.opts = cfg, toml, workertest.WorkerOptions(cfg, b.db.Schema)
			b.enqueue(t, "b1", records(2, nil))
			b.start(t)

			st := b.waitSettled(t, "b1", 30*time.Second)
			require.Equal(t, tc.completed, st.Completed)
			require.Equal(t, int32(2), refused.Load(), "each record's first call")
			require.Equal(t, 2, fake.Stats().Requests, "and one call without the schema each")
			as := recordAttempts(t, b, "b1", "r001")
			require.Len(t, as, 2)
			require.Equal(t, "json_mode_refused", *as[1].Reason)
			require.Equal(t, ledger.ChangeDroppedJSON, as[0].Change)
			if tc.completed == 0 {
				dls, err := ledger.ListDeadLetters(context.Background(), b.db.Pool, ledger.DeadLetterFilter{Batch: "b1"})
				require.NoError(t, err)
				require.Len(t, dls, 2)
				require.Equal(t, "invalid_output", dls[0].Reason)
				require.Contains(t, dls[0].ErrorExcerpt, "the answer does not follow schema_file")
				require.Contains(t, dls[0].ErrorExcerpt, "(rule /additionalProperties)")
			}
		})
	}
}
