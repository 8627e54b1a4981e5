package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
)

// ErrRender is wrapped by Render's errors: the record does not fit the
// prompt template (a missing field, a value the template cannot use). Such a
// record is the record's problem, not the provider's: it will fail the same
// way on every attempt.
var ErrRender = errors.New("prompt does not render for this record")

// templateFuncs are the functions a prompt template may call.
var templateFuncs = template.FuncMap{
	// json renders a value as compact JSON, without HTML escaping.
	"json": func(v any) (string, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return "", err
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	},
}

func (p *Pipeline) parse() (*template.Template, error) {
	return template.New(p.Name).Funcs(templateFuncs).Option("missingkey=error").Parse(p.Prompt)
}

// Render executes the prompt template over record's fields. A field the
// template names but the record lacks is an error (missingkey=error) wrapping
// ErrRender. The error names the pipeline and the field, never record values.
// Safe for concurrent use once Validate (or Parse/Load) has run.
func (p *Pipeline) Render(record map[string]any) (string, error) {
	t := p.tmpl
	if t == nil {
		var err error
		if t, err = p.parse(); err != nil {
			return "", fmt.Errorf("pipeline %q: %w: prompt is not a valid template: %v", p.Name, ErrRender, err)
		}
	}
	var b strings.Builder
	if err := t.Execute(&b, record); err != nil {
		return "", fmt.Errorf("pipeline %q: %w: %v", p.Name, ErrRender, err)
	}
	return b.String(), nil
}
