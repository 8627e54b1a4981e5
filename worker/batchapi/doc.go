// Package batchapi is triage's client for the providers' Batch APIs: the
// OpenAI Batch API (files and batches) and the Anthropic Message Batches API.
// It makes the calls and describes what came back; it keeps no state,
// never retries and never classifies. The durable submitter records every
// step in PostgreSQL and decides what to do next.
//
// # Flow
//
//	lines := []Line{{CustomID: key, Body: body}}   // body: provider.RequestBody
//	fileID, err := c.Upload(ctx, lines, tag)       // OpenAI only; Anthropic: "", nil
//	// record fileID
//	b, err := c.Create(ctx, fileID, lines, tag)
//	// record b.ID
//	b, err = c.Get(ctx, b.ID)                      // poll until b.Ended
//	for r, err := range c.Results(ctx, b) { ... }  // classify r.Res.Observation
//
// Upload and Create are separate calls so that the caller can record the
// file id between them: a crash after Upload leaves a file (free, it expires
// after 30 days), never a batch nobody polls. A crash after Create but before
// the batch id is recorded is what Find is for.
//
// # Lines and results
//
// A Line's Body is the request body the synchronous call sends
// (provider.RequestBody, Stream false), and a Result's Res is what
// provider.Client.Do returns for the same HTTP answer (provider.DecodeResponse),
// so one classifier and one set of reactions serve both modes:
//
//   - OpenAI: a line with a "response" ran, whatever its status_code; its
//     Observation has that status, the body, and the request_id as the
//     x-request-id header. A line with only an "error" never got an HTTP
//     answer (batch_expired: the window closed first) and was not billed:
//     Ran false, NotRun "expired" (or the vendor's code).
//   - Anthropic: "succeeded" is status 200 with the message as body;
//     "errored" gets the status Anthropic documents for its error.type (400
//     invalid_request_error ... 529 overloaded_error; an unknown type 500)
//     with the error envelope as body and its request_id as request-id;
//     "expired" and "canceled" did not run and were not billed.
//
// As for a synchronous call, Res.Observation.Body keeps at most
// provider.MaxBodyBytes of the answer; the decoded text is in Res.Content.
//
// Results come in the provider's order, not the input order. A custom_id
// that does not come back did not run: OpenAI writes no line for a request
// a cancelled batch never started, and a result line that cannot be read is
// yielded as ErrMalformedResult and skipped. The caller treats both as not
// run.
//
// Whole-batch failures: an OpenAI batch whose input file fails validation
// ends with Failed set and Validation listing the errors (Line 0: the file
// as a whole); an Anthropic create that the API refuses is a *CallError with
// the status it answered (400 for a malformed request).
//
// # Errors
//
// Every failed HTTP call returns a *CallError holding the provider.Result of
// that call (phase not_sent, sent_no_response or response; status, headers,
// body), to be classified like any call: exhausted opens the key's breaker,
// throttled waits, transient backs off. A create that is sent_no_response is
// ambiguous: the batch may exist, so Find before resubmitting. Error() holds
// the status and vendor code, never the body or the API key. Bad input is
// refused before any call with ErrInvalidLines or ErrInvalidID.
//
// # Find and its limits
//
// Both vendors list batches newest first. OpenAI batches carry metadata:
// Create sets triage_provider_batch to the tag (the caller's: the submitter
// uses a random tag per provider batch row, unique across databases) and
// Find lists batches for that tag, stopping at those created more than
// FindClockSkew (an hour) before since, by the provider's created_at. The
// tag makes the match exact. since should come from a clock the fleet
// shares (the submitter passes the database's time at the intent), not a
// host's that may run minutes ahead.
//
// Anthropic batches carry no metadata and custom_ids can be read only from
// the results of an ended batch. Find lists batches created since since
// (less FindClockSkew) and keeps those with len(customIDs) requests; an
// ended one whose results hold exactly the customIDs is found. A candidate
// still running cannot be checked: Find returns it with ErrUnconfirmed, and
// the caller must neither resubmit (it may be the batch, and would bill
// twice) nor record it (it may be another's); asking again once it has ended
// settles it. Limits: results are kept 29 days, so a batch older than that
// cannot be confirmed; a batch another client created with the same number
// of requests delays the answer until it ends. A batch this caller already
// recorded holds the same custom_ids when lines are sent again (a line keeps
// its custom_id when its first batch expired): pass Known, and batches it
// reports as recorded are neither candidates nor matches.
//
// # Limits and timeouts
//
// Limits gives the vendor's line limit and BytesPercent of its byte limit
// (OpenAI 50,000 lines and 200 MB per file, Anthropic 100,000 requests and
// 256 MB per create), measured with LineBytes. Timeout bounds each silence
// of a call (no byte moving either way, or no answer yet) rather than the
// whole call: a 200 MB upload or result file can take longer than any
// sensible bound on the whole, and a stalled one is still cut.
//
// Only the vendors openai and anthropic are spoken; the many
// OpenAI-compatible servers do not all have the files and batches
// endpoints, and New refuses them with ErrUnsupportedVendor.
package batchapi
