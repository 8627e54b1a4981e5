package enqueue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/ledger/redact"
	"github.com/triage-dev/triage/worker/enqueue"
)

// FuzzReadJSONL: any input is either read, every record with an id safe to
// print and no NUL, or refused with a *LineError naming the file and a line
// of the input. It never panics.
func FuzzReadJSONL(f *testing.F) {
	for _, seed := range []string{
		"{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":2}\n",
		"{\"id\":\"r\\u001b\"}\n",
		"{\"t\":\"a\\u0000\"}\n",
		"{\"t\":\"C:\\\\u0000\"}\n",
		"\n\n{}\n[1]\n",
		"{\"id\":null}",
		"{\"id\":\"dup\"}\n{\"id\":\"dup\"}\n",
		"{\"id\":\"\xff\"}\n",
		"   {\"a\":{\"b\":[\"\\u0000\"]}}\r\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := enqueue.ReadJSONL(strings.NewReader(in), "in.jsonl")
		if err != nil {
			var le *enqueue.LineError
			require.True(t, errors.As(err, &le), "error without a line: %v", err)
			require.Equal(t, "in.jsonl", le.File)
			require.GreaterOrEqual(t, le.Line, 1)
			require.LessOrEqual(t, le.Line, strings.Count(in, "\n")+1)
			require.True(t, strings.HasPrefix(err.Error(), "in.jsonl:"), err.Error())
			return
		}
		for _, r := range recs {
			require.NotEmpty(t, r.ID)
			require.False(t, redact.HasControl(r.ID), "id %q", r.ID)
			require.Equal(t, redact.Escape(r.ID, false), r.ID)
			var v any
			require.NoError(t, json.Unmarshal(r.Data, &v))
			require.NotContains(t, fmt.Sprint(v), "\x00", "a NUL was accepted")
		}
	})
}
