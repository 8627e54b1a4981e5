package classify

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModelUnservable pins both sides of the pattern (modelpattern.go): a
// model this account, plan, server or router cannot serve, and the wordings
// that name the model but are the request's problem, a passing condition or
// pace. Wordings come from the seen corpora (holdout21h's misses among them)
// and from vendor docs; none is read from holdout21i.
func TestModelUnservable(t *testing.T) {
	t.Parallel()
	held := []string{
		// holdout21h's misses (seen since the ninth round).
		"google/gemini-2.0-pro-exp-02-05:free is not a valid model ID",
		"The requested model 'huihui-ai/Huihui-gpt-oss-20b-BF16-abliterated-v2' is not supported by any provider you have enabled.",
		"Model not supported by provider together",
		"DashScope API error: url error, please check url！ For details, see: https://help.aliyun.com/zh/model-studio/error-code#error-url",
		// corpus21i.
		"invalid model_uri",
		"data retention mode 'default' is not available for this model",
		"model fade out",
		"Your account [2100334555] has reached the set inference limit for the [doubao-seed-1-6-flash] model, and the model service has been paused.",
		"model 'ollama/llama3.2:3' not found or is not available",
		// Vendor docs and earlier corpora.
		"The model `gpt-4o` does not exist or you do not have access to it.",
		"models/gemini-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.",
		"This model models/gemini-2.5-flash is no longer available to new users. Please update your code to use a newer model for the latest features and improvements.",
		"The model `llama3-70b-8192` has been decommissioned and is no longer supported.",
		"Model not found, inaccessible, and/or not deployed",
		"Access to model denied. Please make sure you are eligible for using the model.",
		"The model or endpoint doubao-embedding-large-text-240915 does not exist or you do not have access to it",
		"Invalid model 'sonar-pro '. Permitted models can be found in the documentation at https://docs.perplexity.ai/guides/model-cards.",
		"模型不存在，请检查模型代码。",
		"该模型未开通，请前往控制台开通",
		"Invalid URL (POST /v1/chat/completions/chat/completions)",
		"no Route matched with those values",
	}
	notHeld := []string{
		// The request lacks what the model does not do: rejected.
		"The request is not supported by this model.",
		"Image input is not supported for this model.",
		"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
		"Unsupported value: 'temperature' does not support 0.5 with this model. Only the default (1) value is supported.",
		"tools are not supported by this model",
		"Function calling is not enabled for this model",
		"json mode is not supported for this model",
		"The model gpt-4o does not support images",
		"This model only support stream mode, please enable the stream parameter to access the model.",
		"Invalid request: Your request exceeded model token limit: 262144 (requested: 269030)",
		"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
		"该模型不支持图片输入",
		"Unsupported image url",
		// Passing conditions and pace.
		"The model is overloaded. Please try again later.",
		"Loading model",
		"Service tier capacity exceeded for this model.",
		"The model is temporarily unavailable, please try again later",
		"Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 5, model: gemini-3-flash",
		"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 30000, Requested 500.",
		"All credentials for model gpt-5.6-sol are cooling down via provider codex",
		"dial tcp: no route to host",
		// Neither the model nor the route.
		"Insufficient Balance",
	}
	for _, m := range held {
		require.True(t, modelUnservable(m), "held: %q", m)
	}
	for _, m := range notHeld {
		require.False(t, modelUnservable(m), "not held: %q", m)
	}
}

// TestModelUnservableAllocatesNothing: the pattern runs on every error that
// reaches the request table.
func TestModelUnservableAllocatesNothing(t *testing.T) {
	msg := "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 5, model: gemini-3-flash"
	require.Zero(t, testing.AllocsPerRun(100, func() { modelUnservable(msg) }))
}

// BenchmarkModelUnservable is the pattern on the benchmark body's message,
// which names the model but says nothing about its availability.
func BenchmarkModelUnservable(b *testing.B) {
	msg := "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 5, model: gemini-3-flash\nPlease retry in 58.217843437s."
	b.ReportAllocs()
	for b.Loop() {
		modelUnservable(msg)
	}
}
