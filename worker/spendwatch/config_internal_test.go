package spendwatch

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/service/servicetest"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{Pool: &pgxpool.Pool{}, Config: &config.Config{}, Alerter: &keys.Alerter{}, Every: time.Second}
	servicetest.RequiredFields(t, ok, New, "Pool", "Config", "Alerter")
	servicetest.RefusesNonPositive(t, New, ok, "Every")
	ok.Passes = []Pass{func(context.Context, int) {}, nil}
	servicetest.Refused(t, New, ok, "Config.Passes[1] is nil")
}
