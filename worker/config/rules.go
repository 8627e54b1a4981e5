package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/triage-dev/triage/classify"
)

// Rule is one [[rules]] entry: a classifier rule an operator adds without
// recompiling (after an unknown_error alert: capture the body, add a rule,
// requeue). Rules are checked before the built-in classifier tables, in file
// order, first match wins. Every matcher set must match; at least one is
// required.
type Rule struct {
	// Vendor matches the key's vendor. Default "": any.
	Vendor string `toml:"vendor"`
	// Status matches the HTTP status. Default 0: any.
	Status int `toml:"status"`
	// Code matches the vendor's error code or type (error.code, error.type,
	// error.status, Google reasons, x-amzn-ErrorType, …), case-insensitively.
	// Default "": any.
	Code string `toml:"code"`
	// Message matches a case-insensitive substring of the error message.
	// Default "": any.
	Message string `toml:"message"`
	// MessageRegex matches the error message (Go RE2 syntax; (?i) for
	// case-insensitive). Default "": any.
	MessageRegex string `toml:"message_regex"`
	// Class is the verdict: transient, throttled, exhausted, rejected or
	// ambiguous. Required.
	Class string `toml:"class"`
	// Reason is the verdict's reason slug (lower-case letters, digits, _),
	// shown in dead letters and metrics. Required.
	Reason string `toml:"reason"`
	// RetryAfterS is the wait to report, in seconds. Default unset: the
	// response's own hint.
	RetryAfterS *float64 `toml:"retry_after_s"`
}

// Classifier returns the classifier the worker uses: the [[rules]] checked
// before the built-in tables. Validate builds it; before that (or with no
// rules) it is the built-in classifier alone.
func (c *Config) Classifier() *classify.Classifier { return c.classifier }

// validateRules checks [[rules]] and builds the classifier, naming the bad
// field: `triage.toml: rules[2].class: "retryable" is not a class (…)`.
func (c *Config) validateRules(v *validator) {
	c.classifier = nil
	if len(c.Rules) == 0 {
		return
	}
	ok := true
	urs := make([]classify.UserRule, 0, len(c.Rules))
	for i, r := range c.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		ur := classify.UserRule{Name: at, Vendor: r.Vendor, Status: r.Status, Code: r.Code, Message: r.Message,
			Reason: r.Reason, RetryAfterS: r.RetryAfterS}
		cl, err := classify.ParseClass(r.Class)
		switch {
		case r.Class == "":
			v.addf(at+".class", "is required, one of: transient, throttled, exhausted, rejected, ambiguous")
			ok = false
		case err != nil || cl == classify.OK:
			v.addf(at+".class", "%q is not a class (want one of transient, throttled, exhausted, rejected, ambiguous)", r.Class)
			ok = false
		}
		ur.Class = cl
		if r.Reason == "" {
			v.addf(at+".reason", "is required: a short slug such as arrears_balance")
			ok = false
		}
		if r.MessageRegex != "" {
			re, err := regexp.Compile(r.MessageRegex)
			if err != nil {
				v.addf(at+".message_regex", "%q does not compile: %v", r.MessageRegex, err)
				ok = false
			}
			ur.MessageRegex = re
		}
		urs = append(urs, ur)
	}
	if !ok {
		return
	}
	cl, err := classify.NewClassifier(urs)
	if err != nil {
		// classify names the rule and field ("rules[2].status: …").
		for _, line := range strings.Split(err.Error(), "\n") {
			at, msg, _ := strings.Cut(strings.TrimPrefix(line, classify.ErrInvalidRule.Error()+": "), ": ")
			v.addf(at, "%s", msg)
		}
		return
	}
	c.classifier = cl
}
