package provider

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
)

// IdempotencyKey derives the Idempotency-Key for one request from the batch,
// the record, the pipeline and the request's content hash (RequestHash). It is
// stable across retries of the same request and changes when the request
// does (a fixed pipeline prompt, another model). The result is
// "triage-" followed by 40 hex digits; the parts cannot collide by
// concatenation (each is length-prefixed before hashing).
func IdempotencyKey(batch, recordID, pipeline, requestHash string) string {
	h := sha256.New()
	for _, s := range []string{"triage-idempotency-v1", batch, recordID, pipeline, requestHash} {
		writeField(h, s)
	}
	return "triage-" + hex.EncodeToString(h.Sum(nil)[:20])
}

// RequestHash is a hex SHA-256 over everything a Request sends that affects
// what the model is asked and how it answers: model, system, prompt,
// max_tokens, temperature, JSON mode and its schema, and streaming. IdempotencyKey and
// RecordID are not part of it.
func RequestHash(r Request) string {
	content := struct {
		Model       string   `json:"model"`
		System      string   `json:"system"`
		Prompt      string   `json:"prompt"`
		MaxTokens   int      `json:"max_tokens"`
		Temperature *float64 `json:"temperature"`
		JSON        bool     `json:"json"`
		Stream      bool     `json:"stream"`
		// omitempty: a request without a schema hashes as it always did.
		Schema       string `json:"schema,omitempty"`
		SchemaName   string `json:"schema_name,omitempty"`
		SchemaStrict bool   `json:"schema_strict,omitempty"`
	}{r.Model, r.System, r.Prompt, r.MaxTokens, r.Temperature, r.JSON, r.Stream, string(r.Schema), r.SchemaName, r.SchemaStrict}
	b, _ := json.Marshal(content) // cannot fail: strings, ints, bools, *float64
	h := sha256.New()
	writeField(h, "triage-request-v1")
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
