package classify

import "fmt"

// Class is what a call's outcome means for the reaction. The set is closed:
// every Verdict carries exactly one of these.
type Class int

const (
	// OK: the call succeeded.
	OK Class = iota
	// Transient: the provider failed in a way that a later identical request may not
	// (5xx, overload, connection refused before the request was sent).
	Transient
	// Throttled: a short-window rate limit; wait and re-run without burning an attempt.
	Throttled
	// Exhausted: the key or account is the problem (credits, quota, spend cap, revoked
	// key); no request on this key can succeed until a human acts or the period rolls.
	Exhausted
	// Rejected: the request itself is wrong; resending it unchanged cannot succeed.
	Rejected
	// Ambiguous: the request was sent and no usable answer came back; it may have run
	// and been billed.
	Ambiguous
)

var classNames = [...]string{
	OK:        "ok",
	Transient: "transient",
	Throttled: "throttled",
	Exhausted: "exhausted",
	Rejected:  "rejected",
	Ambiguous: "ambiguous",
}

// Classes lists every class in order, for tables and metrics.
func Classes() []Class { return []Class{OK, Transient, Throttled, Exhausted, Rejected, Ambiguous} }

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("Class(%d)", int(c))
	}
	return classNames[c]
}

// ParseClass is the inverse of String.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("unknown class %q (want one of ok, transient, throttled, exhausted, rejected, ambiguous)", s)
}

func (c Class) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= len(classNames) {
		return nil, fmt.Errorf("invalid class %d", int(c))
	}
	return []byte(classNames[c]), nil
}

func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Verdict is the classifier's answer. JSON field names are a contract (docs/design.md, "JSON shapes").
type Verdict struct {
	Class Class `json:"class"`
	// RetryAfterS is the wait the response asked for, in seconds, or nil.
	RetryAfterS *float64 `json:"retry_after_s"`
	// Code is the vendor's own error type/code, or nil.
	Code *string `json:"code"`
	// Reason is a short slug naming the rule that fired.
	Reason string `json:"reason"`
	// Known is false when no specific rule matched and a default fired.
	Known bool `json:"known"`
	// Rule is the ID of the rule that decided: a built-in row
	// ("anthropic/credit_balance_too_low"), a fixed row ("2xx/ok",
	// "default/unknown_4xx") or a user rule ("user/rules[2]"). Not part of the
	// Verdict's JSON contract; Explain says more about it.
	Rule string `json:"-"`
}
