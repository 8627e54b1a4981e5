package jobrun

import (
	"strings"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
)

// cost prices a call from the usage the provider reported.
func cost(m *config.Model, in, out int) float64 { return m.Cost(in, out) }

// estimateCost is the most a request can cost: its prompt (about four bytes
// a token) plus max_tokens of output. The ledger counts it as possibly billed
// while the call's outcome is unknown.
func estimateCost(m *config.Model, r provider.Request) float64 {
	return cost(m, r.EstimatedTokens(), r.MaxTokens)
}

// stripFence removes a Markdown code fence some models wrap JSON in.
func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") {
		return t
	}
	t = strings.TrimPrefix(t, "```")
	t = strings.TrimPrefix(t, "json")
	t = strings.TrimSuffix(strings.TrimSpace(t), "```")
	return strings.TrimSpace(t)
}
