package classify

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBillingCodesAloneAreExhausted pins OpenAI's billing codes themselves:
// the fixtures carry type insufficient_quota too (as OpenAI documents it may),
// which the same row also matches, so here each code comes without it.
func TestBillingCodesAloneAreExhausted(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"credit_balance_exhausted", "organization_spend_limit_exceeded",
		"project_spend_limit_exceeded", "organization_usage_limit_exceeded"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			v := Classify(Observation{Vendor: "openai", Path: PathDirect, Phase: PhaseResponse, Status: 429,
				Body: `{"error":{"message":"","type":"requests","param":null,"code":"` + code + `"}}`})
			require.Equal(t, Exhausted, v.Class)
			require.Equal(t, "billing_quota", v.Reason)
			require.Equal(t, code, *v.Code)
		})
	}
}
