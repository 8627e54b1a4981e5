// Package fakeprovider is an LLM provider that fails on purpose: an
// http.Handler speaking OpenAI chat completions (POST /v1/chat/completions) and
// Anthropic messages (POST /v1/messages), streaming and not, with the bodies,
// status codes and headers those vendors really send.
//
// triage reacts to a failure by what it means, so its tests need failures that
// look exactly like the real ones: an OpenAI 429 that is a rate limit and one
// that is an empty account differ only in their body; an Anthropic credit
// problem arrives as a 400. A Scenario scripts which failure each request gets:
// per-request scripts (also per record), a token-bucket rate limit, a prepaid
// balance with per-token prices, outage windows by request count or by time on
// an injected clock, poisoned inputs, hangs after the body was read (billed,
// never answered), cut streams, garbage 200s and seeded random faults.
//
// The fake keeps the books a provider keeps: what it billed, per record, and
// whether a record was billed twice. A retry carrying the Idempotency-Key of a
// billed call gets the stored answer back without a second bill; the same retry
// without a key is billed again and counted as a double bill. Stats (also
// GET /__stats) reports it all, exactly, under any concurrency.
//
// Answers are deterministic: the text is derived from a hash of the last user
// message, is a JSON object when the system prompt asks for JSON, and echoes the
// record id when the prompt contains "id":"…" (see ExpectedAnswer), so a test
// can tell that every record got its own answer.
//
// Use it in tests:
//
//	fp := fakeprovider.New(fakeprovider.Scenario{Script: []fakeprovider.Step{{Status: 429}, {Status: 503}, {Status: 200}}})
//	srv := httptest.NewServer(fp)
//	defer srv.Close()
//	defer fp.Close() // before srv.Close: releases hung requests
//	baseURL := srv.URL + "/v1" // for both vendors
//
// It also serves both vendors' Batch APIs (OpenAI files and batches, Anthropic
// message batches) on the scenario clock: each line runs through the same
// checks as a synchronous call and is billed at batch prices (see
// BatchScenario and docs/batch-api.md).
//
// cmd/fakeprovider serves it standalone; docs/fakeprovider.md describes the
// scenario file format and the control endpoints.
package fakeprovider
