package decide

import "github.com/triage-dev/triage/classify"

// Why a dead letter is suspect: the ledger's vocabulary for the column
// (ledger.SuspectSignal, …), repeated here because the decision reaches no
// database package; suspect_test.go checks they agree.
const (
	suspectSignal    = "signal"
	suspectStatus    = "status"
	suspectUnknown   = "unknown_error"
	suspectSafetyNet = "safety_net"
)

// Suspect says why a record dead-lettered with reason after verdict v may
// be fine and its key the problem, "" when it is not: the class came from
// the safety net (reason is one of its hold kinds, holdKinds), from a
// default no rule knew (known:false), or from the classifier's weakest
// evidence, the signal layer or the HTTP status alone. A verdict of a
// vendor or user rule, or of the phase, is not suspect; neither is a dead
// letter no classifier verdict led to (v.Rule empty: a cancel, a record
// past its age, a sweep).
func Suspect(v classify.Verdict, reason string, holdKinds ...string) string {
	for _, k := range holdKinds {
		if reason == k {
			return suspectSafetyNet
		}
	}
	switch {
	case v.Rule == "":
		return ""
	case !v.Known:
		return suspectUnknown
	case v.DecidedBy == classify.DecidedBySignal:
		return suspectSignal
	case v.DecidedBy == classify.DecidedByStatus:
		return suspectStatus
	}
	return ""
}

// SuspectSafetyNet is Suspect's reason for a dead letter of a failure the
// safety net held the key for.
const SuspectSafetyNet = suspectSafetyNet
