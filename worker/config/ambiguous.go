package config

import (
	"slices"
	"time"
)

// Ambiguous is a key's policy for a possibly billed attempt: a call that
// was sent and whose answer was lost (a timeout after sending, a reset, a
// hang after the provider billed it). See Key.Ambiguous.
type Ambiguous string

const (
	// AmbiguousRetry resends the request under the same idempotency key, up
	// to the pipeline's ambiguous_retries. Without a provider that replays a
	// repeated Idempotency-Key (no real vendor documents one), the resend may
	// be billed a second time; the ledger counts it as possibly billed.
	AmbiguousRetry Ambiguous = "retry"
	// AmbiguousDeadLetter never resends a possibly billed attempt: the record
	// is dead-lettered as ambiguous (reason ambiguous_unresolved) with its
	// attempt, for a person to decide.
	AmbiguousDeadLetter Ambiguous = "dead_letter"
	// AmbiguousLookup tags every call with its idempotency key (OpenAI
	// stored completions: store: true and metadata triage_idem) and, before
	// resending a possibly billed attempt, looks it up at the provider for up
	// to LookupWait: a stored completion is the result, billed once. Only
	// vendors with such a look-up (LookupVendors).
	AmbiguousLookup Ambiguous = "lookup"

	// AmbiguousDefault is Key.Ambiguous's default: retry, today's behaviour,
	// which keeps a key's records flowing and counts the possible double
	// bills; lookup (where the vendor has it) and dead_letter are opt-in,
	// because lookup stores completions at the provider and dead_letter
	// leaves records for a person.
	AmbiguousDefault = AmbiguousRetry
	// LookupWaitDefault is Key.LookupWait's default: how long a look-up
	// keeps asking before it takes the call as not run.
	LookupWaitDefault = 30 * time.Second
)

// LookupVendors are the vendors whose API can find a call by its
// idempotency key: OpenAI chat completions created with store: true are
// listed by metadata. Others (Anthropic, and the OpenAI-compatible
// vendors, which do not keep completions) have no look-up.
func LookupVendors() []string { return slices.Clone(lookupVendors) }

var lookupVendors = []string{"openai"}

func (a Ambiguous) valid() bool {
	return a == AmbiguousRetry || a == AmbiguousDeadLetter || a == AmbiguousLookup
}
