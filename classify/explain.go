package classify

import (
	"fmt"
	"slices"
	"strings"
)

// Explanation says why Classify gave its Verdict: which rule decided, and,
// when no rule matched, what was checked before the default fired.
type Explanation struct {
	Verdict Verdict
	// Rule is Verdict.Rule: the ID of the deciding rule.
	Rule string
	// Kind is "user" (a triage.toml rule), "built-in" (a vendor or generic
	// table row), "signal" (the signal layer read the body's wording),
	// "fixed" (phase, odd status, 2xx) or "default" (nothing matched).
	Kind string
	// Fixture is, for a built-in or fixed rule, the testdata file holding the
	// real vendor body that pins it (relative to the repository root).
	Fixture string
	// Tables are the rule tables tried, in order, when the default fired.
	Tables []string
	// Notes are further facts: the error was read inside a 2xx body, the
	// verdict came from OpenRouter's upstream body, the wait came from the
	// message text.
	Notes []string
}

// Explain is Classify with its reasons, using the built-in rules only.
func Explain(o Observation) Explanation { return (*Classifier)(nil).Explain(o) }

// Explain is Classify with its reasons.
func (c *Classifier) Explain(o Observation) Explanation {
	tr := &tracer{}
	v := boundCode(c.classify(o, 0, tr))
	e := Explanation{Verdict: v, Rule: v.Rule}
	switch {
	case isUserRule(v.Rule):
		e.Kind = "user"
	case strings.HasPrefix(v.Rule, signalPrefix):
		e.Kind = "signal"
	case strings.HasPrefix(v.Rule, "default/"):
		e.Kind = "default"
		e.Tables = slices.Compact(tr.tables)
	case strings.Contains(v.Rule, "/") && !strings.HasPrefix(v.Rule, "phase/") && !strings.HasPrefix(v.Rule, "status/") && !strings.HasPrefix(v.Rule, "2xx/"):
		e.Kind = "built-in"
	default:
		e.Kind = "fixed"
	}
	if e.Kind != "user" {
		e.Fixture = ruleFixtures[v.Rule]
	}
	if tr.errorIn2xx {
		e.Notes = append(e.Notes, fmt.Sprintf("the error was read inside a %d body, with the status it names", o.Status))
	}
	if tr.upstream {
		e.Notes = append(e.Notes, "decided by the upstream provider's body in error.metadata.raw: "+strings.Join(tr.ids, " > "))
	}
	if tr.streamError {
		e.Notes = append(e.Notes, "read from the error event of a stream that delivered no output: nothing was generated, so nothing was billed")
	}
	if v.Known && v.NeedsRule() {
		e.Notes = append(e.Notes, "no vendor rule knows this body (decided by "+v.DecidedBy+"): the worker raises the unknown-error alert; a [[rules]] entry in triage.toml decides it for good")
	}
	if strings.Contains(v.Reason, "+long_wait") {
		e.Notes = append(e.Notes, fmt.Sprintf("a wait of %.0f s (an hour or more) means a quota window, so the key is exhausted", deref(v.RetryAfterS)))
	}
	return e
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// String renders e for a terminal, one fact a line.
func (e Explanation) String() string {
	var b strings.Builder
	switch e.Kind {
	case "user":
		fmt.Fprintf(&b, "rule: %s (user rule from triage.toml, checked before the built-in table)\n", strings.TrimPrefix(e.Rule, userRulePrefix))
	case "signal":
		fmt.Fprintf(&b, "rule: %s (signal layer: no vendor row matched; the body's wording decided)\n", e.Rule)
	case "default":
		fmt.Fprintf(&b, "rule: %s (default: no rule matched)\n", e.Rule)
		fmt.Fprintf(&b, "why: no row of the tables %s matched this status and body, so the status class decided (known:false raises the unknown-error alert); add a [[rules]] entry in triage.toml to decide it\n", strings.Join(e.Tables, ", "))
	default:
		fmt.Fprintf(&b, "rule: %s (%s)\n", e.Rule, e.Kind)
	}
	if e.Fixture != "" {
		fmt.Fprintf(&b, "fixture: %s\n", e.Fixture)
	}
	for _, n := range e.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	return b.String()
}
