package batchapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"sync"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/batchapi"
	"github.com/triage-dev/triage/worker/provider"
)

// An OpenAI batch of three records, one of them poisoned, against the fake
// provider whose clock the example moves instead of waiting an hour. Each
// result is classified like a synchronous call.
func Example() {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fp := fakeprovider.New(fakeprovider.Scenario{
		Now:    clock,
		Poison: fakeprovider.Poison{InvalidMarker: "POISON"},
		Batch:  fakeprovider.BatchScenario{Latency: fakeprovider.Duration(time.Hour)},
	})
	srv := httptest.NewServer(fp)
	defer srv.Close()
	defer fp.Close()
	ctx := context.Background()

	c, err := batchapi.New(batchapi.Options{Vendor: "openai", BaseURL: srv.URL + "/v1", APIKey: "sk-test", HTTPClient: srv.Client()})
	if err != nil {
		panic(err)
	}
	var lines []batchapi.Line
	record := map[string]string{} // custom_id -> record id
	for _, id := range []string{"r1", "r2", "r3"} {
		prompt := `Record: {"id":"` + id + `"}`
		if id == "r2" {
			prompt += " POISON"
		}
		r := provider.Request{Model: "gpt-4o-mini", System: "Answer with one JSON object.", Prompt: prompt,
			MaxTokens: 256, JSON: true, RecordID: id}
		r.IdempotencyKey = provider.IdempotencyKey("nightly", id, "enrich", provider.RequestHash(r))
		body, err := provider.RequestBody(provider.FormatOpenAI, r)
		if err != nil {
			panic(err)
		}
		lines = append(lines, batchapi.Line{CustomID: r.IdempotencyKey, Body: body})
		record[r.IdempotencyKey] = id
	}

	fileID, err := c.Upload(ctx, lines, "row-1") // the caller records fileID here
	if err != nil {
		panic(err)
	}
	b, err := c.Create(ctx, fileID, lines, "row-1") // ... and b.ID here
	if err != nil {
		panic(err)
	}
	fmt.Println(b.VendorStatus, b.Ended)

	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	b, err = c.Get(ctx, b.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(b.VendorStatus, b.Ended, b.Counts.Succeeded, b.Counts.Errored)

	var out []string
	for r, err := range c.Results(ctx, b) {
		if err != nil {
			panic(err)
		}
		v := classify.Classify(r.Res.Observation)
		out = append(out, fmt.Sprintf("%s %d %s", record[r.CustomID], r.Res.Observation.Status, v.Class))
	}
	sort.Strings(out)
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// validating false
	// completed true 2 1
	// r1 200 ok
	// r2 400 rejected
	// r3 200 ok
}
