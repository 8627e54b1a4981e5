package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger"
)

// AlertKind names what an alert is about.
type AlertKind string

// Alert kinds raised by triage.
const (
	AlertKeyExhausted  AlertKind = "key_exhausted"
	AlertKeyResumed    AlertKind = "key_resumed"
	AlertUnknownError  AlertKind = "unknown_error"
	AlertBudgetReached AlertKind = "budget_reached"
	AlertPrepaid70     AlertKind = "prepaid_70"
	AlertSpendRate     AlertKind = "spend_rate"
	// AlertStormOpen: the key's storm breaker has been open longer than the
	// key's storm_alert_after (a blip pages nobody).
	AlertStormOpen AlertKind = "storm_open"
	// AlertBatchRefused: the provider refused provider batches as a whole
	// without naming a line, and splitting them did not isolate a bad
	// line (the error persists on a single line, or repeats
	// submitter.Tuning.MaxRefusals times in a row): the lines are
	// dead-lettered instead of being sent again.
	AlertBatchRefused AlertKind = "batch_refused"
	// AlertBatchSettled: every record of a batch has a result or a dead
	// letter. Raised once per settle, fleet-wide (settled.Announce);
	// news, not trouble (Info).
	AlertBatchSettled AlertKind = "batch_settled"
)

// Alert is one thing a human must hear about.
type Alert struct {
	Kind    AlertKind
	Key     string
	Batch   string
	Message string
	// Fields are extra attributes; use snake_case names.
	Fields map[string]any
	// ByHand: the alert reports a person's own action (a requeue, a
	// pause, a resume by hand). It is recorded and posted like any other,
	// but logged at INFO: nothing went wrong.
	ByHand bool
	// Info: the alert is news, not trouble (a batch settled). It is
	// recorded and posted like any other, but logged at INFO.
	Info bool
}

// webhookBody is the JSON POSTed to the webhook.
type webhookBody struct {
	Kind    AlertKind      `json:"kind"`
	Key     string         `json:"key,omitempty"`
	Batch   string         `json:"batch,omitempty"`
	Message string         `json:"message"`
	Fields  map[string]any `json:"fields,omitempty"`
	At      time.Time      `json:"at"`
}

// Alerter defaults.
const (
	AlertWebhookTimeoutDefault = 5 * time.Second
	AlertQueueSizeDefault      = 256
)

// AlerterConfig configures an Alerter.
type AlerterConfig struct {
	// Logger receives the event of every alert: ERROR, or INFO for one
	// ByHand or Info. Default slog.Default().
	Logger *slog.Logger
	// WebhookURL, if set, receives every alert as a JSON POST. Default "": none.
	WebhookURL string
	// WebhookTimeout bounds one POST. Default AlertWebhookTimeoutDefault.
	WebhookTimeout time.Duration
	// QueueSize bounds the alerts waiting to be POSTed; when full, further
	// alerts are logged (and recorded) but not POSTed. Default
	// AlertQueueSizeDefault.
	QueueSize int
	// HTTPClient sends the POSTs. Default a client with no other timeout.
	HTTPClient *http.Client
	// Pool, if set, records every alert as a triage_alert row. Default nil.
	Pool *pgxpool.Pool
	// Clock stamps alerts. Default time.Now.
	Clock Clock
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Alerter raises alerts: an ERROR slog event with alert=true, a triage_alert
// row (when a Pool is configured) and an asynchronous webhook POST (when a
// URL is configured). Alert never blocks on the webhook and never returns an
// error: failures are logged. Flush waits for queued POSTs; Close stops.
type Alerter struct {
	cfg   AlerterConfig
	mu    sync.RWMutex // guards closed against sends on queue
	queue chan alertItem
	done  chan struct{}
	close bool
}

type alertItem struct {
	body  *webhookBody
	flush chan struct{}
}

// Validate refuses a negative WebhookTimeout or QueueSize.
func (c AlerterConfig) Validate() error {
	return notNegative("AlerterConfig", setting{"WebhookTimeout", c.WebhookTimeout}, setting{"QueueSize", c.QueueSize})
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c AlerterConfig) WithDefaults() AlerterConfig {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.WebhookTimeout == 0 {
		c.WebhookTimeout = AlertWebhookTimeoutDefault
	}
	if c.QueueSize == 0 {
		c.QueueSize = AlertQueueSizeDefault
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	return c
}

// NewAlerter returns an Alerter; if a webhook is configured it starts the
// goroutine that POSTs, stopped by Close. A cfg that Validate refuses is
// its error.
func NewAlerter(cfg AlerterConfig) (*Alerter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	a := &Alerter{cfg: cfg, done: make(chan struct{})}
	if cfg.WebhookURL == "" {
		close(a.done)
		return a, nil
	}
	a.queue = make(chan alertItem, cfg.QueueSize)
	go a.run()
	return a, nil
}

// AlertOnce raises al unless its claim was made before, by any process:
// ledger.ClaimOnce in db on (al.Key, claim) picks the one that raises it
// (the prepaid, spend-rate, storm and unknown-error alerts fire once for
// the fleet). A claim that cannot be made is logged and the alert not
// raised; the next check claims again.
func (a *Alerter) AlertOnce(ctx context.Context, db ledger.DBTX, claim string, al Alert) {
	first, err := ledger.ClaimOnce(ctx, db, al.Key, claim)
	if err != nil {
		a.cfg.Logger.WarnContext(ctx, "alert claim", "key", al.Key, "kind", claim, "err", err)
		return
	}
	if first {
		a.Alert(ctx, al)
	}
}

// Alert raises al. It logs synchronously, records the row with a short
// timeout, and queues the webhook POST.
func (a *Alerter) Alert(ctx context.Context, al Alert) {
	attrs := []slog.Attr{
		slog.Bool("alert", true),
		slog.String("alert_kind", string(al.Kind)),
	}
	if al.Key != "" {
		attrs = append(attrs, slog.String("key", al.Key))
	}
	if al.Batch != "" {
		attrs = append(attrs, slog.String("batch", al.Batch))
	}
	for k, v := range al.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	msg := al.Message
	if msg == "" {
		msg = string(al.Kind)
	}
	level := slog.LevelError
	if al.ByHand || al.Info {
		level = slog.LevelInfo
	}
	a.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)

	body := &webhookBody{Kind: al.Kind, Key: al.Key, Batch: al.Batch, Message: msg, Fields: al.Fields, At: a.cfg.Clock.Now().UTC()}
	if a.cfg.Pool != nil {
		a.record(ctx, body)
	}
	if a.queue == nil {
		return
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.close {
		a.cfg.Logger.WarnContext(ctx, "alert webhook closed, not sent", slog.String("alert_kind", string(al.Kind)))
		return
	}
	select {
	case a.queue <- alertItem{body: body}:
	default:
		a.cfg.Logger.WarnContext(ctx, "alert webhook queue full, not sent", slog.String("alert_kind", string(al.Kind)))
	}
}

func (a *Alerter) record(ctx context.Context, b *webhookBody) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	row := ledger.AlertRow{Kind: string(b.Kind), Key: b.Key, Batch: b.Batch, Message: b.Message, CreatedAt: b.At}
	if err := ledger.RecordAlert(ctx, a.cfg.Pool, row, b.Fields); err != nil {
		a.cfg.Logger.WarnContext(ctx, "alert not recorded", slog.String("alert_kind", string(b.Kind)), slog.String("err", err.Error()))
	}
}

func (a *Alerter) run() {
	defer close(a.done)
	for it := range a.queue {
		if it.flush != nil {
			close(it.flush)
			continue
		}
		if err := a.post(it.body); err != nil {
			a.cfg.Logger.Warn("alert webhook failed", slog.String("alert_kind", string(it.body.Kind)), slog.String("err", err.Error()))
		}
	}
}

func (a *Alerter) post(b *webhookBody) error {
	payload, err := json.Marshal(b)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.WebhookURL, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook status %d", resp.StatusCode)
	}
	return nil
}

// Flush waits until every alert queued before it has been POSTed (or failed),
// or ctx ends.
func (a *Alerter) Flush(ctx context.Context) error {
	if a.queue == nil {
		return nil
	}
	ch := make(chan struct{})
	a.mu.RLock()
	if a.close {
		a.mu.RUnlock()
		return nil
	}
	select {
	case a.queue <- alertItem{flush: ch}:
	case <-ctx.Done():
		a.mu.RUnlock()
		return ctx.Err()
	}
	a.mu.RUnlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close sends what is queued (bounded by ctx) and stops the sender. Alerts
// raised after Close are logged and recorded only.
func (a *Alerter) Close(ctx context.Context) error {
	a.mu.Lock()
	if !a.close && a.queue != nil {
		a.close = true
		close(a.queue)
	}
	a.mu.Unlock()
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
