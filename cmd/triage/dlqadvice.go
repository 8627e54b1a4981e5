package main

import (
	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/decide"
)

// requeueAdvice is what to do before requeueing a dead letter of this
// class and reason, in a few words, ending where `triage dlq requeue`
// follows: a cancelled record needs no fix, a key that cannot pay needs
// the key or the account fixed, a throttled one only room on the key.
func requeueAdvice(class, reason string) string {
	switch reason {
	case decide.ReasonCancelled, ledger.ReasonCancelledByHand:
		return "cancelled by hand, nothing to fix; only if you want the record after all"
	case ledger.ReasonJobMissing:
		return "its job was deleted from the queue by hand, nothing to fix; only if you want the record after all"
	case decide.ReasonSnoozedOut:
		return "waited too long behind the key's rate limit; when the key has room (`triage keys`)"
	case decide.ReasonInvalidOutput:
		return "the answer broke the pipeline's output contract (a requeue is called and billed again); after fixing the prompt or the output setting"
	case decide.ReasonAmbiguousUnresolved, decide.ReasonAmbiguousExhausted:
		return "sent with no answer, possibly billed (a requeue may pay twice); after checking `triage ledger --calls --batch B --record R`"
	case decide.ReasonRetriesExhausted:
		return "the provider kept failing; when it is healthy again"
	case decide.ReasonWorkerErrors:
		return "the worker's own errors (database, panics); after reading the worker's log"
	case decide.ReasonConfig, decide.ReasonTemplate:
		return "after fixing the pipeline in triage.toml"
	}
	switch class {
	case classify.Exhausted.String():
		return "the key was refused or out of credit; after fixing the key (its API key, the account's billing)"
	case classify.Throttled.String():
		return "the provider kept throttling; when the key has room (`triage keys`)"
	case classify.Transient.String():
		return "the provider kept failing; when it is healthy again"
	case classify.Rejected.String():
		return "the provider refused the request; after fixing the pipeline or the record"
	}
	return "after fixing the cause"
}
