package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/triage-dev/triage/classify"
)

func init() {
	register(command{
		name:    "classify",
		summary: "classify provider responses (--jsonl on stdin, or one with --vendor/--status)",
		run:     runClassify,
	})
}

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want 'Name: value', got %q", s)
	}
	h[name] = strings.TrimSpace(value)
	return nil
}

func runClassify(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage classify", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	jsonl := fs.Bool("jsonl", false, "read Observations, one JSON object a line, on stdin; write one Verdict a line")
	vendor := fs.String("vendor", "", "vendor rule set: "+strings.Join(classify.Vendors(), " "))
	status := fs.Int("status", 0, "HTTP status code")
	bodyFile := fs.String("body-file", "", "file holding the response body (- for stdin)")
	path := fs.String("path", string(classify.PathDirect), "direct | router | gateway")
	phase := fs.String("phase", string(classify.PhaseResponse), "response | not_sent | sent_no_response | stream")
	explain := fs.Bool("explain", false, "also say which rule decided (built-in row and its fixture, or a [[rules]] entry) or why the default did")
	headers := headerFlags{}
	fs.Var(headers, "header", "response header 'Name: value' (repeatable)")
	setUsage(fs, e,
		"usage: triage classify --jsonl [--explain] < observations.jsonl",
		"       triage classify --vendor V --status N [--header 'K: V']... --body-file F [--path P] [--phase P] [--explain]",
		"The [[rules]] of the configuration (--config, TRIAGE_CONFIG or ./triage.toml, if any) are checked first.",
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "triage classify: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := loadConfigOptional(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage classify: %v\n", err)
		return exitUsage
	}
	var cl *classify.Classifier
	if cfg != nil {
		cl = cfg.Classifier()
	}
	if *jsonl {
		set := ""
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "jsonl" && f.Name != "explain" && set == "" {
				set = f.Name
			}
		})
		if set != "" {
			fmt.Fprintf(e.stderr, "triage classify: --%s cannot be used with --jsonl\n", set)
			return exitUsage
		}
		return classifyJSONL(ctx, e, cl, *explain)
	}

	switch {
	case *vendor == "":
		fmt.Fprintln(e.stderr, "triage classify: --vendor is required (or use --jsonl)")
		return exitUsage
	case !classify.KnownVendor(*vendor):
		fmt.Fprintf(e.stderr, "triage classify: --vendor %q is not one of: %s\n", *vendor, strings.Join(classify.Vendors(), " "))
		return exitUsage
	case *path != string(classify.PathDirect) && *path != string(classify.PathRouter) && *path != string(classify.PathGateway):
		fmt.Fprintf(e.stderr, "triage classify: --path %q is not one of: direct router gateway\n", *path)
		return exitUsage
	}
	switch classify.Phase(*phase) {
	case classify.PhaseResponse, classify.PhaseNotSent, classify.PhaseSentNoResponse, classify.PhaseStream:
	default:
		fmt.Fprintf(e.stderr, "triage classify: --phase %q is not one of: response not_sent sent_no_response stream\n", *phase)
		return exitUsage
	}
	if classify.Phase(*phase) == classify.PhaseResponse && (*status < 100 || *status > 599) {
		fmt.Fprintf(e.stderr, "triage classify: --status %d is not an HTTP status (100-599)\n", *status)
		return exitUsage
	}
	var body []byte
	if *bodyFile != "" {
		var err error
		if *bodyFile == "-" {
			body, err = io.ReadAll(e.stdin)
		} else {
			body, err = os.ReadFile(*bodyFile)
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "triage classify: --body-file %s: %v\n", *bodyFile, err)
			return exitUsage
		}
	}
	o := classify.Observation{
		Vendor: *vendor, Path: classify.Path(*path), Phase: classify.Phase(*phase),
		Status: *status, Headers: headers, Body: string(body),
	}
	if *explain {
		ex := cl.Explain(o)
		if err := writeJSONLine(e.stdout, ex.Verdict); err != nil {
			fmt.Fprintf(e.stderr, "triage classify: write: %v\n", err)
			return exitRuntime
		}
		fmt.Fprint(e.stdout, ex.String())
		return exitOK
	}
	if err := writeJSONLine(e.stdout, cl.Classify(o)); err != nil {
		fmt.Fprintf(e.stderr, "triage classify: write: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// explainedVerdict is a --jsonl --explain output line: the Verdict's fields
// followed by the explanation's.
type explainedVerdict struct {
	classify.Verdict
	Rule     string   `json:"rule"`
	RuleKind string   `json:"rule_kind"`
	Fixture  string   `json:"fixture,omitempty"`
	Tables   []string `json:"tables_checked,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

func explained(cl *classify.Classifier, o classify.Observation) explainedVerdict {
	ex := cl.Explain(o)
	return explainedVerdict{Verdict: ex.Verdict, Rule: ex.Rule, RuleKind: ex.Kind, Fixture: ex.Fixture, Tables: ex.Tables, Notes: ex.Notes}
}

// classifyJSONL reads Observations a line at a time. bufio.Reader.ReadSlice
// has no line-length limit when its ErrBufferFull is handled, so a 1 MB body
// on one line is fine. A malformed line gets {"error":"line N: ..."} in its
// place and the run goes on.
func classifyJSONL(ctx context.Context, e *env, cl *classify.Classifier, explain bool) int {
	r := bufio.NewReaderSize(e.stdin, 64<<10)
	w := bufio.NewWriter(e.stdout)
	defer w.Flush()
	var line []byte
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(e.stderr, "triage classify: %v\n", err)
			return exitRuntime
		}
		line = line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = r.ReadSlice('\n')
			line = append(line, chunk...)
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			w.Flush()
			fmt.Fprintf(e.stderr, "triage classify: reading stdin at line %d: %v\n", n, err)
			return exitRuntime
		}
		text := strings.TrimSpace(string(line))
		if text == "" {
			if errors.Is(err, io.EOF) {
				return exitOK
			}
			// A blank line still holds its place so output lines match input lines.
			writeJSONLine(w, map[string]string{"error": "line " + strconv.Itoa(n) + ": empty line"})
			continue
		}
		var o classify.Observation
		dec := json.NewDecoder(strings.NewReader(text))
		if derr := dec.Decode(&o); derr != nil {
			writeJSONLine(w, map[string]string{"error": fmt.Sprintf("line %d: %v", n, derr)})
		} else if dec.More() {
			writeJSONLine(w, map[string]string{"error": fmt.Sprintf("line %d: more than one JSON value", n)})
		} else if !classify.KnownVendor(o.Vendor) {
			// As in single mode: a typo in the vendor must not silently fall
			// back to the generic rules.
			writeJSONLine(w, map[string]string{"error": fmt.Sprintf("line %d: vendor %q is not one of: %s", n, o.Vendor, strings.Join(classify.Vendors(), " "))})
		} else if explain {
			writeJSONLine(w, explained(cl, o))
		} else {
			writeJSONLine(w, cl.Classify(o))
		}
		if errors.Is(err, io.EOF) {
			return exitOK
		}
	}
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
