package classify

import "testing"

// The eighth corpus (issue 21, seventh round): 45 more bodies of 2025-2026
// from GitHub issues and pull requests and vendor or gateway docs, none of
// them a body or a source already in testdata/, split once by
// testdata/split21g.py (seed 217, a third aside) and committed before any
// rule or lexicon entry was written from them; holdout21g is scored, never
// read. Kept in a file of its own so that the per-round tests of
// corpus_test.go can be restructured without touching this round's.
const (
	corpus21gDir  = "corpus21g"
	holdout21gDir = "holdout21g"

	// Before any change from this round (the rules after holdout21f's
	// round): holdout21g 10/15 (66.7 %) with 4 dangerous, corpus21g 20/30
	// (66.7 %) with 10 dangerous.
	// After the rules read from corpus21g and vendor docs (the GitHub
	// Copilot API's model codes and wording in the model table, Alibaba's
	// PrepaidBillOverdue and PostpaidBillOverdue, a numeric code and msg in
	// a 200 read as an error, three lexicon entries): corpus21g 30/30,
	// holdout21g unchanged, 10/15 (66.7 %) with 4 dangerous. Still missed
	// (not fixed: that would be writing rules from the holdout): Alibaba's
	// 429 CommodityNotPurchased, AiHubMix's 503 "Incorrect model ID", Kiro's
	// 400 "Invalid model" and a local Ollama's 500 "unable to load model"
	// (each a model the account or server cannot serve, read as throttled,
	// transient or rejected: dangerous), and OpenRouter's 402
	// in_flight_budget_exhausted (exhausted, want throttled). The bars are
	// what the rules clear, not the 98 % the issue asks for.
	holdout21gMinAccuracy  = 0.66
	holdout21gMaxDangerous = 4
	corpus21gMinAccuracy   = 1.0
	corpus21gMaxDangerous  = 0
)

// TestHoldout21gAccuracy scores the eighth held-aside corpus (issue 21,
// seventh round).
func TestHoldout21gAccuracy(t *testing.T) {
	checkCorpus(t, "holdout21g", holdout21gDir, holdout21gMaxDangerous, holdout21gMinAccuracy)
}

// TestCorpus21gAccuracy scores the part of the eighth corpus the rules may
// be extended from.
func TestCorpus21gAccuracy(t *testing.T) {
	checkCorpus(t, "corpus21g", corpus21gDir, corpus21gMaxDangerous, corpus21gMinAccuracy)
}
