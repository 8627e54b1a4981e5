package sweep

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/service/servicetest"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Pool: &pgxpool.Pool{}, Config: &config.Config{}, MaxAge: time.Hour, Every: time.Second}
	servicetest.RequiredFields(t, ok, New, "Pool", "Config")
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Every = 0 }, "Config.Every must be positive"},
		{func(c *Config) { c.Every = -time.Second }, "Config.Every must be positive"},
		{func(c *Config) { c.MaxAge = 0 }, "Config.MaxAge must be positive"},
	} {
		c := ok
		tc.edit(&c)
		servicetest.Refused(t, New, c, tc.want)
	}
}

// An orphan's dead letter says how its job ended.
func TestDeadLetterByHowTheJobEnded(t *testing.T) {
	t.Parallel()
	s := &Sweeper{cfg: Config{Config: &config.Config{}}}
	for _, tc := range []struct {
		state   string
		class   classify.Class
		reason  string
		excerpt string
	}{
		{"discarded", classify.Transient, ReasonDiscarded, "River discarded the job after its last attempt; last error: boom"},
		{"cancelled", classify.Rejected, ledger.ReasonCancelledByHand, "the job was cancelled outside triage"},
		{"", classify.Rejected, ledger.ReasonJobMissing, "the record has no job left in River"},
		{"completed", classify.Rejected, ledger.ReasonJobMissing, "the record's last job is completed but the record has no result"},
	} {
		row := s.deadLetter(orphan{batch: "b", recordID: "r1", pipeline: "p", jobID: 7, state: tc.state, attempt: 2, lastErr: "boom"})
		require.Equal(t, tc.class, row.Class, tc.state)
		require.Equal(t, tc.reason, row.Reason, tc.state)
		require.Contains(t, row.ErrorExcerpt, tc.excerpt, tc.state)
		require.Equal(t, "b", row.Batch)
		require.Equal(t, int64(7), row.JobID)
		require.Equal(t, 2, row.Attempts)
	}
}
