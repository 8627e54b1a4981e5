package keys

import (
	"context"

	"github.com/triage-dev/triage/classify"
)

// OutcomeOf is what a provider's answer of class c tells the breakers: the
// one mapping from a verdict to a breaker outcome, used for a job's call
// (the worker) and for a batch create (the submitter) alike.
//
//   - ok: success.
//   - rejected: the provider answered, so it is up (a success for the storm
//     breaker); a rejection says nothing about the balance (excluded for
//     the exhausted breaker's probe).
//   - transient: a failure for the storm breaker.
//   - exhausted: trips the exhausted breaker.
//   - throttled, ambiguous: say nothing about either (gobreaker's
//     IsExcluded).
func OutcomeOf(c classify.Class) Outcome {
	switch c {
	case classify.OK:
		return OutcomeSuccess
	case classify.Rejected:
		return OutcomeRejected
	case classify.Transient:
		return OutcomeFailure
	case classify.Exhausted:
		return OutcomeExhausted
	default:
		return OutcomeExcluded
	}
}

// Heard is the outcome a run may report for what it learned, by the one
// rule for probe claims: a run that holds a probe claim settles it only
// with a real call to the provider, made by this run under this admission
// (called). An answer it did not ask for now (a response-cache hit, a
// stored provider-batch answer, a prior outcome in the ledger, a dead
// letter before the call) says nothing about the provider or the balance
// now: the claim is given back without success or failure (OutcomeNone), so
// that the next real call probes. An ordinary admission's outcome is kept:
// a stored answer that says the key is exhausted still trips it.
func Heard(adm Admission, o Outcome, called bool) Outcome {
	if adm.Probe && !called {
		return OutcomeNone
	}
	return o
}

// Settle reports the outcome o of a call admitted as adm by Store.Admit
// rather than by the gate's Admit (the batch submitter's creates, which are
// the key's probe when one is due), by the gate's own rules: Heard first,
// then a probe of either breaker is settled exactly as a job's probe is
// (Done); outside a probe, an exhausted answer trips the key (Report.Tripped
// for the one call that opened it) and nothing else feeds the breakers.
func (g *Gate) Settle(ctx context.Context, adm Admission, o Outcome, reason string, called bool) (Report, error) {
	o = Heard(adm, o, called)
	if adm.Probe {
		return g.probeDone(context.WithoutCancel(ctx), adm, o, reason)
	}
	if o != OutcomeExhausted || !adm.Allowed {
		return Report{}, nil
	}
	tripped, err := g.store.Trip(context.WithoutCancel(ctx), g.cfg.Key, adm, orDefault(reason, "exhausted"), g.cfg.ProbeInterval)
	if err != nil {
		return Report{}, err
	}
	return Report{Tripped: tripped, Changed: true}, nil
}
