package fakeprovider_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/triage-dev/triage/fakeprovider"
)

// A batch that takes an hour on the scenario clock, with one poisoned request:
// the test moves the clock instead of waiting, then reads the results.
func ExampleBatchScenario() {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }

	fp := fakeprovider.New(fakeprovider.Scenario{
		Now:    clock,
		Poison: fakeprovider.Poison{InvalidMarker: "POISON"},
		Batch:  fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)},
	})
	srv := httptest.NewServer(fp)
	defer srv.Close()
	defer fp.Close()
	client := anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey("sk-test"))
	ctx := context.Background()

	var p anthropic.MessageBatchNewParams
	for _, text := range []string{"first", "second POISON", "third"} {
		p.Requests = append(p.Requests, anthropic.MessageBatchNewParamsRequest{
			CustomID: strings.Fields(text)[0],
			Params: anthropic.MessageBatchNewParamsRequestParams{Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}},
		})
	}
	batch, err := client.Messages.Batches.New(ctx, p)
	if err != nil {
		panic(err)
	}
	fmt.Println(batch.ProcessingStatus, batch.RequestCounts.Processing)

	advance(time.Hour)
	batch, _ = client.Messages.Batches.Get(ctx, batch.ID, anthropic.MessageBatchGetParams{})
	fmt.Println(batch.ProcessingStatus, batch.RequestCounts.Succeeded, batch.RequestCounts.Errored)

	results := map[string]string{}
	stream := client.Messages.Batches.ResultsStreaming(ctx, batch.ID, anthropic.MessageBatchResultsParams{})
	for stream.Next() {
		r := stream.Current()
		results[r.CustomID] = r.Result.Type
		if r.Result.Type == "errored" {
			results[r.CustomID] += " " + r.Result.AsErrored().Error.Error.Type
		}
	}
	stream.Close()
	fmt.Println(results["first"], "|", results["second"], "|", results["third"])
	st := fp.Stats()
	fmt.Println("billed:", st.BilledCalls, "double billed:", st.DoubleBilledRecords)
	// Output:
	// in_progress 3
	// ended 2 1
	// succeeded | errored invalid_request_error | succeeded
	// billed: 2 double billed: 0
}
