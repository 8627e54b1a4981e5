package config

// Overflow is what a pipeline does with a request the model's context
// window cannot hold.
type Overflow string

const (
	// OverflowDeadLetter: the record is dead-lettered as context_length after
	// its one call.
	OverflowDeadLetter Overflow = "dead_letter"
	// OverflowTruncate: the record's longest string fields are shortened to
	// fit the context less max_tokens and the request is sent once more;
	// the result is marked truncated.
	OverflowTruncate Overflow = "truncate"
	// OnOverflowDefault is Pipeline.OnOverflow's default: a record is never
	// changed unless the pipeline says so.
	OnOverflowDefault = OverflowDeadLetter
)

func (p *Pipeline) overflowDefaults() {
	if p.OnOverflow == "" {
		p.OnOverflow = OnOverflowDefault
	}
}

func (p *Pipeline) validateOverflow(v *validator, at string) {
	switch p.OnOverflow {
	case OverflowDeadLetter, OverflowTruncate:
	default:
		v.addf(at, "on_overflow %q is not one of: dead_letter, truncate", p.OnOverflow)
	}
}
