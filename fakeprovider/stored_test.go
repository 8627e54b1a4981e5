package fakeprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// A call made with store: true and metadata is listed, as the official SDK
// asks for it (ChatCompletionListParams.Metadata), once the store lag has
// passed; every call is billed, a look-up is not.
func TestStoredCompletionsListedByMetadataWithSDK(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, StoreLag: fakeprovider.Duration(5 * time.Second)})
	ctx := ctxT(t)

	p := oaParams("rec-1")
	p.Store = openai.Bool(true)
	p.Metadata = shared.Metadata{"triage_idem": "idem-1"}
	res, err := b.openai.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	other := oaParams("rec-2")
	other.Store = openai.Bool(true)
	other.Metadata = shared.Metadata{"triage_idem": "idem-2"}
	_, err = b.openai.Chat.Completions.New(ctx, other)
	require.NoError(t, err)
	_, err = b.openai.Chat.Completions.New(ctx, oaParams("rec-3")) // not stored
	require.NoError(t, err)

	list := func() []openai.ChatCompletion {
		page, err := b.openai.Chat.Completions.List(ctx, openai.ChatCompletionListParams{Metadata: shared.Metadata{"triage_idem": "idem-1"}})
		require.NoError(t, err)
		return page.Data
	}
	require.Empty(t, list(), "not visible before the store lag")
	b.clock.Advance(5 * time.Second)
	got := list()
	require.Len(t, got, 1)
	require.Equal(t, res.ID, got[0].ID)
	require.Equal(t, res.Choices[0].Message.Content, got[0].Choices[0].Message.Content)
	require.Equal(t, res.Usage.PromptTokens, got[0].Usage.PromptTokens)
	require.Equal(t, res.Usage.CompletionTokens, got[0].Usage.CompletionTokens)
	require.Equal(t, "idem-1", got[0].Metadata["triage_idem"])

	st := b.fp.Stats()
	require.Equal(t, 3, st.BilledCalls, "every call billed, look-ups free")
	require.Equal(t, 2, st.StoreLookups)
}

// A call that hangs after billing is stored all the same: the look-up is how
// a client that lost the answer finds it.
func TestStoredCompletionOfHungCall(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeprovider.Scenario{NoReplay: true, RecordScripts: map[string][]fakeprovider.Step{"rec-1": {{Action: fakeprovider.ActionHang}}}})
	ctx := ctxT(t)
	p := oaParams("rec-1")
	p.Store = openai.Bool(true)
	p.Metadata = shared.Metadata{"triage_idem": "idem-h"}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := b.openai.Chat.Completions.New(short, p, option.WithHeader(fakeprovider.RecordHeader, "rec-1"))
	require.Error(t, err)
	page, err := b.openai.Chat.Completions.List(ctx, openai.ChatCompletionListParams{Metadata: shared.Metadata{"triage_idem": "idem-h"}})
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	require.Equal(t, 1, b.fp.Stats().BilledCalls)
}
