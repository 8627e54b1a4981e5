package jobrun

import (
	"sync"
	"time"

	"github.com/triage-dev/triage/ledger/redact"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/keys"
	"github.com/triage-dev/triage/worker/provider"
)

// Throttle waits (the adaptive default of docs/design.md).
const (
	// ThrottleWaitMax bounds the adaptive pause after throttles that name no
	// wait: it doubles with each further one on the key within a minute.
	ThrottleWaitMax = 2 * time.Minute
	// ThrottleWaitCap bounds a throttle's pause whatever retry-after says: a
	// wait of hours is a quota, which the classifier calls exhausted.
	ThrottleWaitCap = time.Hour
)

// KeyConfig is what NewKey needs of one key this process works.
type KeyConfig struct {
	// Config is the key's configuration.
	Config *config.Key
	// Client calls the key's provider.
	Client *provider.Client
	// CallMax is the longest one call may take (config.CallMax): the
	// key's timeout, or its streams' ceiling when longer.
	CallMax time.Duration
	// APIKey is only used to strip the key from dead-letter excerpts, in
	// case an endpoint echoes it back in an error body.
	APIKey string
	// Gate admits calls and hears their outcomes (keys.Store.NewGate).
	Gate *keys.Gate
	// Pacer paces the key's calls in this process.
	Pacer *keys.Pacer
	// Watch is the safety net's thresholds (keys.WatchSettings).
	Watch keys.WatchSettings
	// ThrottleWait is the first adaptive throttle pause.
	ThrottleWait time.Duration
}

// Key is one key's in-process state.
type Key struct {
	cfg     *config.Key
	client  *provider.Client
	callMax time.Duration
	apiKey  string
	redact  redact.Boundary // the edge for the provider's text: see observe
	limiter *keys.Limiter
	// gate admits calls and hears their outcomes: both breakers and the
	// pause, shared by the fleet, and this process's storm breaker.
	gate  *keys.Gate
	pacer *keys.Pacer
	// watch is the safety net's view of the key's outcomes in this
	// process (watch.go).
	watch *keys.Watch

	mu            sync.Mutex
	lastThrottle  time.Time
	throttleWait  time.Duration
	throttleFirst time.Duration
}

// NewKey builds a key's in-process state: its concurrency limiter and
// safety-net view start empty.
func NewKey(c KeyConfig) *Key {
	return &Key{
		cfg: c.Config, client: c.Client, callMax: c.CallMax, apiKey: c.APIKey, redact: redact.New(c.APIKey),
		limiter: keys.NewLimiter(keys.LimiterConfig{Max: c.Config.Concurrency}),
		gate:    c.Gate, pacer: c.Pacer, watch: keys.NewWatch(c.Watch), throttleFirst: c.ThrottleWait,
	}
}

// Config is the key's configuration.
func (k *Key) Config() *config.Key { return k.cfg }

// Client is the key's provider client.
func (k *Key) Client() *provider.Client { return k.client }

// APIKey is the key's secret (for the batch client).
func (k *Key) APIKey() string { return k.apiKey }

// Gate is the key's gate.
func (k *Key) Gate() *keys.Gate { return k.gate }

// Pacer is the key's pacer in this process.
func (k *Key) Pacer() *keys.Pacer { return k.pacer }

// Limiter is the key's concurrency limiter in this process.
func (k *Key) Limiter() *keys.Limiter { return k.limiter }

// nextThrottleWait is the adaptive pause for a throttle without a hint.
func (k *Key) nextThrottleWait(now time.Time) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.throttleWait == 0 || now.Sub(k.lastThrottle) > time.Minute {
		k.throttleWait = k.throttleFirst
	} else {
		k.throttleWait = min(2*k.throttleWait, ThrottleWaitMax)
	}
	k.lastThrottle = now
	return k.throttleWait
}
