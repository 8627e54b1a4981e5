package keys

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Clock tells the time. Tests pin it; production leaves StoreConfig.Clock nil
// so that every process in the fleet uses the database's clock.
type Clock interface {
	Now() time.Time
}

// ProbeLeaseDefault is StoreConfig.ProbeLease's default: how long a probe
// claim stays exclusive. It must exceed the per-attempt timeout (60 s by
// default) plus the time a dispatched probe job waits to be fetched.
const ProbeLeaseDefault = 3 * time.Minute

// StoreConfig configures a Store.
type StoreConfig struct {
	// Clock pins the time used in SQL. Default nil: the database's now(), so
	// that processes whose clocks disagree still agree on the breaker.
	Clock Clock

	// ProbeLease is how long a probe claim is exclusive. After it, a probe
	// claimed by a worker that crashed can be claimed again. Default
	// ProbeLeaseDefault.
	ProbeLease time.Duration

	// Owner names this process in triage_pause.set_by. Default
	// "<hostname>:<pid>".
	Owner string

	// RiverSchema is the schema of River's tables (River's Config.Schema).
	// Default "": found through the connection's search_path.
	RiverSchema string

	// ProbeAttemptsLeft and ProbeMaxAge describe a job that cannot call (its
	// worker dead-letters it first): fewer than ProbeAttemptsLeft River
	// attempts left, or queued longer than ProbeMaxAge. Such jobs are
	// dispatched as a probe only when no other job is available, so a key
	// is probed with a job that can call. Default 0: not used.
	ProbeAttemptsLeft int
	ProbeMaxAge       time.Duration
}

// Validate refuses a negative ProbeLease, ProbeAttemptsLeft or
// ProbeMaxAge.
func (c StoreConfig) Validate() error {
	return notNegative("StoreConfig", setting{"ProbeLease", c.ProbeLease},
		setting{"ProbeAttemptsLeft", c.ProbeAttemptsLeft}, setting{"ProbeMaxAge", c.ProbeMaxAge})
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c StoreConfig) WithDefaults() StoreConfig {
	if c.ProbeLease == 0 {
		c.ProbeLease = ProbeLeaseDefault
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	return c
}

// Store is the per-key state shared by the fleet: breakers and pauses, kept
// in PostgreSQL (tables triage_key_state and triage_pause). It holds no
// lock between calls and is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	cfg  StoreConfig
}

// NewStore returns a Store on pool, whose search_path must reach triage's
// tables. A cfg that Validate refuses is its error.
func NewStore(pool *pgxpool.Pool, cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{pool: pool, cfg: cfg.WithDefaults()}, nil
}

// DefaultStore is NewStore with every setting at its default (the
// database's clock, an owner of its own): it has nothing to refuse. The
// operator's views and the CLI read and act on the shared key state
// through it.
func DefaultStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, cfg: StoreConfig{}.WithDefaults()}
}

// nowParam is the time given to SQL as coalesce($n::timestamptz, now()).
func (s *Store) nowParam() *time.Time {
	if s.cfg.Clock == nil {
		return nil
	}
	t := s.cfg.Clock.Now()
	return &t
}

// now is the Clock's time, or zero for the database's clock: the ledger's
// "now" argument.
func (s *Store) now() time.Time {
	if s.cfg.Clock == nil {
		return time.Time{}
	}
	return s.cfg.Clock.Now()
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ErrInvalidKey is returned for an empty key name.
var ErrInvalidKey = errors.New("keys: empty key name")

func checkKey(key string) error {
	if key == "" {
		return ErrInvalidKey
	}
	return nil
}
