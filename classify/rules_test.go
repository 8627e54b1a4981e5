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

// TestJSONSchemaRefused: an endpoint that refuses response_format
// json_schema (output = "json_schema" on a model without structured
// output) refuses the droppable feature, as it does for json_object: the
// request works without it, and the answer is still checked.
func TestJSONSchemaRefused(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "azure-openai", "other"} {
		v := Classify(Observation{Vendor: vendor, Path: PathDirect, Phase: PhaseResponse, Status: 400,
			Body: `{"error":{"message":"Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model. Learn more about supported models at the Structured Outputs guide: https://platform.openai.com/docs/guides/structured-outputs","type":"invalid_request_error","param":null,"code":null}}`})
		require.Equal(t, Rejected, v.Class, vendor)
		require.Equal(t, "json_mode_refused", v.Reason, vendor)
	}
}
