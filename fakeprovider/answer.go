package fakeprovider

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// answer is a billed model response, kept apart from its wire format so an
// idempotent replay can be rendered for whichever endpoint and mode asks again.
type answer struct {
	id           string // chatcmpl-… or msg_…; the replay keeps the original
	created      int64
	model        string
	text         string
	refusal      bool   // Anthropic policy block: stop_reason "refusal", no text
	tool         string // Anthropic: text is the input of a tool_use block of this tool
	inputTokens  int
	outputTokens int
	// incomplete: the answer was cut short, "max_output_tokens" or
	// "content_filter" (ActionIncomplete, or a Responses-API call whose
	// answer is longer than its max_output_tokens).
	incomplete string
}

// chatFinishReason is the finish_reason chat completions give a.
func chatFinishReason(a *answer) string {
	switch a.incomplete {
	case "max_output_tokens":
		return "length"
	case "content_filter":
		return "content_filter"
	}
	return "stop"
}

// idPattern finds the record id a prompt was rendered from, as a JSON field,
// so each answer can be checked against the record it was meant for.
var idPattern = regexp.MustCompile(`"id"\s*:\s*(?:"((?:[^"\\]|\\.)*)"|(-?[0-9]+))`)

func echoedID(prompt string) (string, bool) {
	m := idPattern.FindStringSubmatch(prompt)
	if m == nil {
		return "", false
	}
	if m[2] != "" {
		return m[2], true
	}
	var s string
	if json.Unmarshal([]byte(`"`+m[1]+`"`), &s) != nil {
		return m[1], true
	}
	return s, true
}

var labels = [...]string{"amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor",
	"indigo", "juniper", "kelp", "lagoon", "marble", "nectar", "onyx", "pebble"}

// answerText is a pure function of the last user message (and whether JSON was
// asked for), so tests can compute the expected answer for every record.
func answerText(lastUser string, asJSON bool) string {
	sum := sha256.Sum256([]byte(lastUser))
	digest := hex.EncodeToString(sum[:4])
	label := labels[sum[4]%byte(len(labels))]
	score := float64(binary.BigEndian.Uint16(sum[5:7])%101) / 100
	id, hasID := echoedID(lastUser)
	if !asJSON {
		if hasID {
			return fmt.Sprintf("Record %s: %s (%s), score %s.", id, label, digest, strconv.FormatFloat(score, 'f', -1, 64))
		}
		return fmt.Sprintf("Answer %s: %s, score %s.", digest, label, strconv.FormatFloat(score, 'f', -1, 64))
	}
	obj := struct {
		ID     *string `json:"id,omitempty"`
		Label  string  `json:"label"`
		Score  float64 `json:"score"`
		Digest string  `json:"digest"`
	}{Label: label, Score: score, Digest: digest}
	if hasID {
		obj.ID = &id
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// ExpectedAnswer is the text the fake answers to a prompt whose last user
// message is lastUser; asJSON is whether the system prompt asked for JSON (or,
// for OpenAI, response_format did). Tests use it to check a result belongs to
// its record.
func ExpectedAnswer(lastUser string, asJSON bool) string { return answerText(lastUser, asJSON) }
