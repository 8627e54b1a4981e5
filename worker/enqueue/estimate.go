package enqueue

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
)

// Estimate is what a batch would send, before anything is written or sent
// (`triage enqueue --dry-run`, `triage run --dry-run`). Its tokens are the
// budget's: estimateTokens for each record's input, the pipeline's
// max_tokens as the most a record's answer can cost.
type Estimate struct {
	Pipeline *config.Pipeline
	Model    *config.Model
	Key      *config.Key
	// Records is every record of the input.
	Records int
	// InputTokens sums the estimated input tokens of the records within
	// the model's context window.
	InputTokens int64
	// OverContext counts the records whose estimated input is over the
	// model's context_tokens (0: unknown, never): the provider refuses them
	// (context_length) before billing anything, so they are not in
	// InputTokens. OverContextTokens is their input.
	OverContext       int
	OverContextTokens int64
}

// Sent is the number of records that would reach the provider.
func (e Estimate) Sent() int { return e.Records - e.OverContext }

// MaxOutputTokens is the most output the sent records can cost: max_tokens
// each, what the budget reserves for a call.
func (e Estimate) MaxOutputTokens() int64 { return int64(e.Sent()) * int64(e.Pipeline.MaxTokens) }

// EstimateJSONL reads a JSONL input with enqueue's rules (a bad line, a
// duplicate id or a prompt that does not render is a *LineError naming
// file:line; no records is ErrNoRecords) and estimates it for pipeline,
// one record at a time. Nothing is written.
func EstimateJSONL(cfg *config.Config, pipeline string, r io.Reader, file string) (Estimate, error) {
	pl, err := cfg.Pipeline(pipeline)
	if err != nil {
		return Estimate{}, err
	}
	key, model, err := cfg.KeyFor(pipeline)
	if err != nil {
		return Estimate{}, err
	}
	est := Estimate{Pipeline: pl, Model: model, Key: key}
	src := &jsonlSource{br: bufio.NewReaderSize(r, 64<<10)}
	seen := map[string]int{}
	for {
		rec, _, err := src.next()
		if errors.Is(err, io.EOF) {
			break
		}
		lineErr := &LineError{}
		if errors.As(err, &lineErr) {
			lineErr.File = file
		}
		if err != nil {
			return Estimate{}, err
		}
		if first, dup := seen[rec.ID]; dup {
			return Estimate{}, &LineError{File: file, Line: rec.Line, Err: fmt.Errorf("record id %q already used on line %d", rec.ID, first)}
		}
		seen[rec.ID] = rec.Line
		var fields map[string]any
		if err := json.Unmarshal(rec.Data, &fields); err != nil {
			return Estimate{}, &LineError{File: file, Line: rec.Line, Err: fmt.Errorf("invalid JSON: %w", err)}
		}
		prompt, err := pl.Render(fields)
		if err != nil {
			return Estimate{}, &LineError{File: file, Line: rec.Line, Err: fmt.Errorf("pipeline %q prompt: %w", pl.Name, err)}
		}
		in := int64(provider.Request{System: pl.System, Prompt: prompt}.EstimatedTokens())
		est.Records++
		if model.ContextTokens > 0 && in > int64(model.ContextTokens) {
			est.OverContext++
			est.OverContextTokens += in
			continue
		}
		est.InputTokens += in
	}
	if est.Records == 0 {
		return Estimate{}, fmt.Errorf("%s %w", file, ErrNoRecords)
	}
	return est, nil
}
