package config

import (
	"fmt"
	"time"
)

// Mode is how a pipeline's calls reach its model.
type Mode string

const (
	// ModeSync: one synchronous HTTP call per record (the default).
	ModeSync Mode = "sync"
	// ModeBatch: the records go to the provider's Batch API (OpenAI Batch,
	// Anthropic Message Batches) at half the price, answered within 24 h.
	ModeBatch Mode = "batch"
	// ModeAuto: the Batch API while the batch's deadline is further away
	// than AutoMargin, synchronous calls for what is left once it is nearer
	// (a batch with no deadline always uses the Batch API).
	ModeAuto Mode = "auto"
)

// ModeDefault is Pipeline.Mode's default.
const ModeDefault = ModeSync

// AutoMarginDefault is Pipeline.AutoMargin's default. Both vendors promise
// results within 24 h but usually deliver far sooner (Anthropic: most
// batches within the hour); three hours lets a batch that was merely slow
// finish, and still leaves the synchronous remainder time to run before the
// deadline.
const AutoMarginDefault = 3 * time.Hour

// BatchVendors are the vendors whose Batch API the worker drives.
var batchVendors = map[string]bool{"openai": true, "anthropic": true}

// UsesBatch reports whether the pipeline sends any record through a Batch API.
func (p *Pipeline) UsesBatch() bool { return p.Mode == ModeBatch || p.Mode == ModeAuto }

// BatchPrices returns the model's batch prices per million tokens, input
// and output.
func (m *Model) BatchPrices() (in, out float64) {
	return m.BatchInputUSDPerMTok, m.BatchOutputUSDPerMTok
}

// Cost prices usage (input and output tokens) at the model's synchronous
// prices. One formula for every place that prices a call: the worker, the
// submitter's orphaned answers, the estimates.
func (m *Model) Cost(in, out int) float64 {
	return float64(in)*m.InputUSDPerMTok/1e6 + float64(out)*m.OutputUSDPerMTok/1e6
}

// BatchCost prices usage at the model's batch prices.
func (m *Model) BatchCost(in, out int) float64 {
	return float64(in)*m.BatchInputUSDPerMTok/1e6 + float64(out)*m.BatchOutputUSDPerMTok/1e6
}

// batchOptions reads the pipeline's mode settings from the file.
func (rp rawPipeline) batchOptions(p *Pipeline) error {
	p.Mode = Mode(rp.Mode)
	d, err := parseDuration(rp.AutoMargin)
	if err != nil {
		return fmt.Errorf("auto_margin %q: %w", rp.AutoMargin, err)
	}
	p.AutoMargin = d
	return nil
}

func (p *Pipeline) batchDefaults() {
	if p.Mode == "" {
		p.Mode = ModeDefault
	}
	if p.Mode == ModeAuto && p.AutoMargin == 0 {
		p.AutoMargin = AutoMarginDefault
	}
}

func (m *Model) batchDefaults() {
	// Both vendors charge half the synchronous price for batch lines.
	if m.BatchInputUSDPerMTok == 0 {
		m.BatchInputUSDPerMTok = m.InputUSDPerMTok / 2
	}
	if m.BatchOutputUSDPerMTok == 0 {
		m.BatchOutputUSDPerMTok = m.OutputUSDPerMTok / 2
	}
}

func (m *Model) validateBatch(v *validator, at string) {
	if !finiteNonNeg(m.BatchInputUSDPerMTok) {
		v.addf(at, "batch_input_usd_per_mtok must not be negative, got %v", m.BatchInputUSDPerMTok)
	}
	if !finiteNonNeg(m.BatchOutputUSDPerMTok) {
		v.addf(at, "batch_output_usd_per_mtok must not be negative, got %v", m.BatchOutputUSDPerMTok)
	}
}

// validateBatch checks the mode of every pipeline against what a batch line
// can carry and what its models' keys can do.
func (c *Config) validateBatch(v *validator) {
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		at := elem("pipelines", i, p.Name)
		switch p.Mode {
		case ModeSync, ModeBatch, ModeAuto:
		default:
			v.addf(at, "mode %q is not one of: sync, batch, auto", p.Mode)
			continue
		}
		if p.AutoMargin < 0 {
			v.addf(at, "auto_margin must be positive, got %s", p.AutoMargin)
		}
		if p.AutoMargin > 0 && p.Mode != ModeAuto {
			v.addf(at, "auto_margin needs mode = \"auto\"")
		}
		if !p.UsesBatch() {
			continue
		}
		if p.Stream {
			// A batch line is answered in one piece, hours later: there
			// is no stream to cut or to keep a partial answer of.
			v.addf(at, "stream = true needs mode = \"sync\": a Batch API answers each line whole, there is no stream")
		}
		for _, name := range append([]string{p.Model}, p.Fallback...) {
			m, err := c.Model(name)
			if err != nil {
				continue // reported elsewhere
			}
			k, err := c.Key(m.Key)
			if err != nil {
				continue
			}
			if !batchVendors[k.Vendor] {
				v.addf(at, "mode = %q needs a Batch API, which key %q (vendor %q, serving model %q) does not have: use a key of vendor openai or anthropic, or mode = \"sync\"",
					p.Mode, k.Name, k.Vendor, m.Name)
			}
		}
	}
}
