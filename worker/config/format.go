package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Format is a key's wire format (Key.Format).
type Format string

const (
	// FormatVendor ("", the default) is the vendor's own format: Anthropic
	// messages for vendor anthropic, OpenAI-compatible chat completions for
	// the others.
	FormatVendor Format = ""
	// FormatChatCompletions is OpenAI-compatible chat completions
	// ({base_url}/chat/completions), the default of every vendor but
	// anthropic.
	FormatChatCompletions Format = "chat_completions"
	// FormatMessages is Anthropic messages ({base_url}/messages), vendor
	// anthropic's default.
	FormatMessages Format = "messages"
	// FormatResponses is the OpenAI Responses API ({base_url}/responses),
	// vendor "openai" only: in-band failures (response.failed, error
	// events, incomplete responses) are classified by their code.
	FormatResponses Format = "responses"

	// ResponsesMinOutputTokens is the smallest max_output_tokens the
	// Responses API takes: a pipeline's max_tokens below it is refused.
	ResponsesMinOutputTokens = 16
)

// BackgroundPollMax is the longest wait between two polls of a background
// response (Key.Background); the first poll comes after BackgroundPollMin
// and each wait doubles.
const (
	BackgroundPollMin = 100 * time.Millisecond
	BackgroundPollMax = 2 * time.Second
)

// ResponsesVendors are the vendors that speak the Responses API here.
var ResponsesVendors = []string{"openai"}

// check says what is wrong with format f on vendor ("": nothing).
func (f Format) check(vendor string) string {
	switch f {
	case FormatVendor:
		return ""
	case FormatChatCompletions:
		if vendor == "anthropic" {
			return `format = "chat_completions" is not vendor "anthropic"'s format: leave format out (Anthropic messages), or use an OpenAI-compatible vendor`
		}
		return ""
	case FormatMessages:
		if vendor != "anthropic" {
			return fmt.Sprintf(`format = "messages" is Anthropic's; vendor %q speaks chat completions: leave format out`, vendor)
		}
		return ""
	case FormatResponses:
		if vendor != "openai" {
			return fmt.Sprintf(`format = "responses" (the OpenAI Responses API) needs vendor "openai"; vendor %q does not speak it: leave format out`, vendor)
		}
		return ""
	}
	return fmt.Sprintf("format %q is not one of: chat_completions, messages, responses (or leave it out for the vendor's own)", string(f))
}

// Responses says the key speaks the OpenAI Responses API.
func (k *Key) Responses() bool { return k.Format == FormatResponses }

// checkFormats refuses a [[keys]] format its vendor does not speak, naming
// the file, the line of the format setting and the key:
//
//	triage.toml:9: keys[1] "claude": format = "responses" (the OpenAI Responses API) needs vendor "openai"; …
func (r rawFile) checkFormats(name string, data []byte) error {
	var errs []error
	for i, rk := range r.Keys {
		msg := Format(rk.Format).check(rk.Vendor)
		if msg == "" {
			continue
		}
		at := name
		if n := settingLine(data, "keys", i, "format"); n > 0 {
			at = fmt.Sprintf("%s:%d", name, n)
		}
		errs = append(errs, fmt.Errorf("%s: %s: %s", at, elem("keys", i, rk.Name), msg))
	}
	return errors.Join(errs...)
}

// settingLine is the 1-based line of setting in the i-th [[table]] of a
// TOML file, 0 when it is not written there on a line of its own.
func settingLine(data []byte, table string, i int, setting string) int {
	header := "[[" + table + "]]"
	n, inTable := -1, false
	for ln, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			if strings.HasPrefix(t, header) {
				n++
			}
			inTable = strings.HasPrefix(t, header) && n == i
			continue
		}
		if !inTable {
			continue
		}
		if k, _, ok := strings.Cut(t, "="); ok && strings.Trim(strings.TrimSpace(k), `"'`) == setting {
			return ln + 1
		}
	}
	return 0
}
