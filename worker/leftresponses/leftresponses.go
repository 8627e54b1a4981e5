// Package leftresponses ends the background responses left running at
// the provider for records no longer wanted (ledger.LeftResponses: a batch
// cancelled by hand while their jobs were queued, so no run of theirs
// polls or cancels them). Each is fetched; one still running is cancelled
// at the provider; the ledger then records how it ended
// (ledger.SettleLeftResponse): cancelled, or ended before the cancel and
// billed, its usage priced once. Only the given keys' clients are asked
// (another process works the others). Several processes may run it at
// once: a cancel is idempotent at the provider and the ledger settles each
// attempt once. Every worker runs a pass on each spend check
// (worker/spendwatch).
package leftresponses

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
	"github.com/triage-dev/triage/worker/service"
)

// leftResponsesPerPass bounds the background responses one pass ends: two
// calls each (a fetch, a cancel), the rest next time.
const leftResponsesPerPass = 50

// leftStep is what the pass does next with a left background response,
// from the provider's answer to a fetch or a cancel (leftStepOf).
type leftStep int

const (
	// leftLater: no useful answer (network, 429, 5xx, a cancel still
	// under way): ask again at the next pass.
	leftLater leftStep = iota
	// leftStuck: an answer that will not change by asking again (404:
	// the provider has no such response, 401: the key was revoked…):
	// left unknown in the ledger, said once in the log.
	leftStuck
	// leftCancel: still queued or in progress: cancel it.
	leftCancel
	// leftCancelled: it ended cancelled: settle it so.
	leftCancelled
	// leftEnded: it ended (completed, failed, incomplete) and was billed:
	// settle it with its usage.
	leftEnded
)

// leftStepOf decides leftStep from a fetch's or a cancel's result.
func leftStepOf(res provider.Result) leftStep {
	o := res.Observation
	switch {
	case o.Phase != classify.PhaseResponse || o.Status == http.StatusTooManyRequests || o.Status >= 500:
		return leftLater
	case o.Status/100 != 2 || res.ResponseStatus == "":
		return leftStuck
	case res.Pending():
		return leftLater
	case res.ResponseStatus == "cancelled":
		return leftCancelled
	default:
		return leftEnded
	}
}

// Client fetches and cancels a key's background responses
// (provider.Client).
type Client interface {
	Poll(ctx context.Context, responseID string) (provider.Result, error)
	Cancel(ctx context.Context, responseID string) (provider.Result, error)
}

// Config is what a Canceller works with. Pool and Config are required
// (Validate); Logger has a default (WithDefaults).
type Config struct {
	// Pool reaches triage's tables.
	Pool *pgxpool.Pool
	// Config prices a response's usage by its model.
	Config *config.Config
	// Clients are the clients of this process's keys that create
	// background responses (config.Key.Responses), by key name. None: a
	// pass does nothing.
	Clients map[string]Client
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns cfg with its zero optional fields filled.
func (cfg Config) WithDefaults() Config {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return cfg
}

// Validate refuses a config a Canceller cannot work with, naming the
// field.
func (cfg Config) Validate() error {
	for name, c := range cfg.Clients {
		if c == nil {
			return fmt.Errorf("leftresponses: Config.Clients[%q] is nil", name)
		}
	}
	return service.Required("leftresponses", service.Field{Name: "Pool", Missing: cfg.Pool == nil},
		service.Field{Name: "Config", Missing: cfg.Config == nil})
}

// Canceller ends left background responses, a bounded number per pass
// (RunOnce); it is safe for use by one goroutine at a time.
type Canceller struct {
	cfg Config
	// stuck holds the left responses whose provider answer was said once
	// in the log.
	stuck sync.Map
}

// New returns a Canceller, or Validate's error.
func New(cfg Config) (*Canceller, error) {
	return service.New(cfg, func(cfg Config) *Canceller { return &Canceller{cfg: cfg} })
}

// RunOnce is one pass: up to leftResponsesPerPass left responses of the
// configured keys are fetched, cancelled while they run, and settled.
func (c *Canceller) RunOnce(ctx context.Context) {
	if len(c.cfg.Clients) == 0 {
		return // no key here can have left one
	}
	left, err := ledger.LeftResponses(ctx, c.cfg.Pool, leftResponsesPerPass)
	if err != nil {
		if ctx.Err() == nil {
			c.cfg.Logger.WarnContext(ctx, "left background responses", "err", err)
		}
		return
	}
	for _, l := range left {
		if ctx.Err() != nil {
			return
		}
		if client := c.cfg.Clients[l.Key]; client != nil {
			c.end(ctx, client, l)
		}
	}
}

// end fetches a left response, cancels it while it runs, and settles its
// attempts from how it ended.
func (c *Canceller) end(ctx context.Context, client Client, l ledger.LeftResponse) {
	log := c.cfg.Logger.With("key", l.Key, "batch", l.Batch, "record_id", l.RecordID, "response_id", l.ResponseID)
	res, err := client.Poll(ctx, l.ResponseID)
	step := leftStepOf(res)
	if err == nil && step == leftLater && res.Pending() {
		res, err = client.Cancel(ctx, l.ResponseID)
		step = leftStepOf(res)
	}
	if err != nil {
		log.WarnContext(ctx, "end a background response left running", "err", err)
		return
	}
	out := ledger.LeftOutcome{InputTokens: res.InputTokens, OutputTokens: res.OutputTokens}
	switch step {
	case leftLater:
		return
	case leftStuck:
		if _, seen := c.stuck.LoadOrStore(l.Key+"\x00"+l.ResponseID, true); !seen {
			log.WarnContext(ctx, "background response left running: the provider's answer leaves it unknown, possibly billed",
				"http_status", res.Observation.Status)
		}
		return
	case leftCancelled:
		out.Reason = ledger.ReasonResponseCancelled
	case leftEnded:
		out.Reason = ledger.ReasonResponseEndedUnwanted
	}
	if m, err := c.cfg.Config.Model(l.Model); err == nil {
		out.CostUSD = m.Cost(out.InputTokens, out.OutputTokens)
	}
	n, err := ledger.SettleLeftResponse(context.WithoutCancel(ctx), c.cfg.Pool, l.Key, l.ResponseID, out)
	if err != nil {
		log.WarnContext(ctx, "settle a background response left running", "err", err)
		return
	}
	if n > 0 {
		log.InfoContext(ctx, "background response left running for a cancelled record: ended at the provider",
			"status", res.ResponseStatus, "reason", out.Reason, "cost_usd", out.CostUSD, "attempts", n)
	}
}
