package config

import (
	"strings"
	"testing"
)

// FuzzParse: any file is either accepted or refused with errors that each
// name the file and then a line, an element or a field. It never panics.
func FuzzParse(f *testing.F) {
	f.Add(minimal)
	f.Add(minimal + "concurrency = 0\n")
	f.Add(minimal + "max_attempts = -1\n")
	f.Add("[[keys]]\nname = 3\n")
	f.Add("[database]\nurl = \"mysql://x\"\n")
	f.Add("[[pipelines]]\nname = \"p\"\nprompt = \"{{\"\n")
	f.Add("x = [\n")
	f.Add("[[keys]]\ntimeout = \"-1s\"\n[[keys]]\nname=\"a\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := Parse([]byte(in), "t.toml")
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without an error")
			}
			return
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.HasPrefix(line, "t.toml: ") {
				t.Fatalf("an error line that does not name the file: %q", line)
			}
			rest := strings.TrimPrefix(line, "t.toml: ")
			if !strings.Contains(rest, "line ") && !strings.Contains(rest, ": ") && !strings.Contains(rest, "unknown key") &&
				!strings.Contains(rest, "[") && !strings.Contains(rest, "=") {
				t.Fatalf("an error that names no line, element or field: %q", line)
			}
		}
	})
}
