package classify

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// userRulePrefix starts the ID of every user rule ("user/rules[2]").
const userRulePrefix = "user/"

func isUserRule(id string) bool { return strings.HasPrefix(id, userRulePrefix) }

// UserRule is one [[rules]] entry of triage.toml: what an operator adds after
// an unknown_error alert, without recompiling. Every matcher that is set must
// match; at least one must be set. User rules are checked before the built-in
// tables, in order, first match wins.
type UserRule struct {
	// Name identifies the rule in Explain and in dead letters, e.g.
	// "rules[2]" (its place in the file). Required.
	Name string
	// Vendor matches the key's vendor exactly. "" matches any.
	Vendor string
	// Status matches the HTTP status (for an error inside a 2xx body, the
	// status the error names). 0 matches any.
	Status int
	// Code matches any of the vendor's own codes, case-insensitively:
	// error.code, error.type, error.status, Google ErrorInfo reasons, the
	// Anthropic details code, Azure innererror code, OpenRouter error_type,
	// x-amzn-ErrorType, Cloudflare codes, a Gemini block reason. "" matches any.
	Code string
	// Message matches a case-insensitive substring of the error message. ""
	// matches any.
	Message string
	// MessageRegex matches the error message (RE2 syntax; add (?i) for
	// case-insensitive). nil matches any.
	MessageRegex *regexp.Regexp
	// Class is the verdict's class. Required; not OK.
	Class Class
	// Reason is the verdict's reason slug: lower-case letters, digits and _.
	// Required.
	Reason string
	// RetryAfterS, if set, is the wait the verdict reports (seconds, >= 0).
	// Without it the response's own hint applies.
	RetryAfterS *float64

	id      string // userRulePrefix + Name
	lowered string // Message, lower-cased
}

// ErrInvalidRule is wrapped by every NewClassifier error.
var ErrInvalidRule = errors.New("invalid user rule")

var reasonRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// NewClassifier checks rules and returns a Classifier that tries them before
// the built-in tables. Errors name the rule and its field, e.g.
// `rules[2].reason: "Bad Reason" must be lower-case letters, digits and _`.
func NewClassifier(rules []UserRule) (*Classifier, error) {
	var errs []error
	out := make([]UserRule, 0, len(rules))
	for _, r := range rules {
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%w: %s.%s: %s", ErrInvalidRule, r.Name, field, fmt.Sprintf(format, args...)))
		}
		if r.Name == "" {
			errs = append(errs, fmt.Errorf("%w: a rule has no name", ErrInvalidRule))
			continue
		}
		if r.Vendor == "" && r.Status == 0 && r.Code == "" && r.Message == "" && r.MessageRegex == nil {
			bad("match", "set at least one of vendor, status, code, message, message_regex")
		}
		if r.Status != 0 && (r.Status < 100 || r.Status > 599) {
			bad("status", "%d is not an HTTP status", r.Status)
		}
		if r.Vendor != "" && !KnownVendor(r.Vendor) {
			bad("vendor", "%q is not one of: %s", r.Vendor, strings.Join(Vendors(), ", "))
		}
		if _, err := r.Class.MarshalText(); err != nil || r.Class == OK {
			bad("class", "must be one of transient, throttled, exhausted, rejected, ambiguous")
		}
		if !reasonRE.MatchString(r.Reason) {
			bad("reason", "%q must be lower-case letters, digits and _", r.Reason)
		}
		if x := r.RetryAfterS; x != nil && (math.IsNaN(*x) || math.IsInf(*x, 0) || *x < 0) {
			bad("retry_after_s", "must be 0 or more seconds, got %v", *x)
		}
		r.id = userRulePrefix + r.Name
		r.lowered = strings.ToLower(r.Message)
		out = append(out, r)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Classifier{rules: out}, nil
}

// Rules returns the user rules, in order.
func (c *Classifier) Rules() []UserRule {
	if c == nil {
		return nil
	}
	return append([]UserRule(nil), c.rules...)
}

func (r *UserRule) matches(f *facts) bool {
	if r.Vendor != "" && r.Vendor != f.vendor {
		return false
	}
	if r.Status != 0 && r.Status != f.status {
		return false
	}
	if r.Code != "" && !f.hasCode(r.Code) {
		return false
	}
	if r.Message != "" && !strings.Contains(f.lower(), r.lowered) {
		return false
	}
	if r.MessageRegex != nil && !r.MessageRegex.MatchString(f.message()) {
		return false
	}
	return true
}

// hasCode reports whether code is any of the body's (or headers') own codes.
func (f *facts) hasCode(code string) bool {
	for _, c := range [...]string{f.code, f.typ, f.gstatus, f.detailsErrorCode, f.innerCode,
		f.metaErrorType, f.amzType, f.blockReason, f.blockedFinish} {
		if c != "" && strings.EqualFold(c, code) {
			return true
		}
	}
	for _, c := range f.reasons {
		if strings.EqualFold(c, code) {
			return true
		}
	}
	for _, c := range f.cfCodes {
		if strconv.Itoa(c) == code {
			return true
		}
	}
	return false
}
