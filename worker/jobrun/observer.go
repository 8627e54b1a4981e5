package jobrun

import (
	"time"

	"github.com/triage-dev/triage/classify"
)

// Observer hears about every provider call this process makes, after it is
// classified. Implementations must be cheap and safe for concurrent use: they
// run on the job's path.
type Observer interface {
	ObserveCall(c CallEvent)
}

// CallEvent describes one finished call.
type CallEvent struct {
	Key string
	// Batch is the triage batch the call was made for.
	Batch   string
	Class   classify.Class
	Status  int  // HTTP status; 0 when no status line arrived
	Known   bool // false: no classifier rule matched
	Retry   bool // not the record's first call
	CostUSD float64
	Elapsed time.Duration
}
