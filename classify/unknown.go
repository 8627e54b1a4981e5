package classify

import "slices"

// defaultUnknownReasons are the reasons of the verdicts Classify gives when
// no specific rule matched (known:false) outside the rule tables.
var defaultUnknownReasons = []string{"unknown_phase", "unexpected_status", "unknown_4xx", "unknown_5xx"}

// UnknownReason reports whether reason is one a known:false verdict carries:
// a default that fired, or a table row that is a deliberate fallback. A dead
// letter keeps its reason, not the verdict's known flag, so this is how
// `unknown=` on the dead-letter page finds the errors no rule explained.
func UnknownReason(reason string) bool {
	if slices.Contains(defaultUnknownReasons, reason) {
		return true
	}
	for _, tables := range chains {
		for _, t := range tables {
			for _, r := range t.rules {
				if r.unknown && r.reason == reason {
					return true
				}
			}
		}
	}
	return false
}
