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

// TestMinimaxCodeOnTheAnthropicEndpoint: MiniMax's Anthropic-compatible
// endpoint writes its business code at the end of the message, under a type
// of its own choosing (an api_error 500 for a balance), so the code decides,
// not the type: a balance is exhausted, not Anthropic's overloaded. Only a
// message that ends in " (NNNN)" with a code of MiniMax's table is read.
func TestMinimaxCodeOnTheAnthropicEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		msg    string
		class  Class
		reason string
	}{
		{500, "insufficient balance (1008)", Exhausted, "insufficient_balance"},
		{401, "invalid api key (2049)", Exhausted, "credential"},
		{429, "rate limit (1002)", Throttled, "rate_limit"},
		{500, "system error (1033)", Transient, "server_error"},
		{500, "Internal server error", Transient, "overloaded"},        // no code: Anthropic's row
		{500, "insufficient balance(1008)", Exhausted, "signal_money"}, // not " (NNNN)": the lexicon
		{500, "released in (2024)", Transient, "overloaded"},           // not a MiniMax code
	} {
		v := Classify(Observation{Vendor: "anthropic", Path: PathDirect, Phase: PhaseResponse, Status: tc.status,
			Body: `{"type":"error","error":{"type":"api_error","message":"` + tc.msg + `"}}`})
		require.Equal(t, tc.class, v.Class, tc.msg)
		require.Equal(t, tc.reason, v.Reason, tc.msg)
	}
	// Z.ai's four-digit codes come in error.code and stay the zhipu table's.
	v := Classify(Observation{Vendor: "other", Path: PathDirect, Phase: PhaseResponse, Status: 401,
		Body: `{"error":{"code":"1002","message":"Authorization Token非法，请确认Authorization Token正确传递。"}}`})
	require.Equal(t, Exhausted, v.Class)
	require.Equal(t, "credential", v.Reason)
	require.Equal(t, "zhipu/credential", v.Rule)
}
