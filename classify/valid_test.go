package classify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validEdges are the corners of JSON's grammar where a hand-written validator
// goes wrong: escapes, control characters, numbers, literals, white space,
// nesting at and past encoding/json's limit, and long plain runs that cross
// the eight-byte words plainRun reads.
var validEdges = []string{
	``, ` `, `"`, `""`, `"a`, `"\"`, `"\\"`, `"\/"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\u12aF"`,
	"\"a\tb\"", "\"a\x1fb\"", "\"a\x7fb\"", "\"\xff\xfe\"", `"é\"ü"`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1.5e10`, `-1.0E+2`, `1x`,
	`true`, `tru`, `truex`, `null`, `nul`, `false`, `False`,
	`{}`, `{ }`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`, `[]`, `[1,]`, `[,1]`, `[1 2]`,
	" \n\t\r[1]\r\n ", `[1]]`, `{"a":[{"b":null}]}`, `[1] 2`,
	`"` + strings.Repeat("x", 7) + `"`, `"` + strings.Repeat("x", 8) + `"`, `"` + strings.Repeat("x", 17) + `\"` + `"`,
	`"` + strings.Repeat("x", 15) + "\x01" + `"`, `"` + strings.Repeat("\\\\", 9) + `"`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range validEdges {
		require.Equal(t, json.Valid([]byte(s)), validJSON(s), "%.80q", s)
	}
	for _, fx := range loadFixtures(t) {
		require.True(t, validJSON(fx.Observation.Body) == json.Valid([]byte(fx.Observation.Body)))
	}
}

func FuzzValidJSONMatchesEncodingJSON(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.Observation.Body)
	}
	for _, s := range validEdges {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validJSON(s) != json.Valid([]byte(s)) {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", s, validJSON(s), json.Valid([]byte(s)))
		}
	})
}

func TestKeyIsMatchesEqualFold(t *testing.T) {
	t.Parallel()
	names := []string{"error", "message", "@type", "reason", "quotaId", "k", "s"}
	keys := []string{`"error"`, `"ERROR"`, `"Error"`, `"erro"`, `"errors"`, `"err\u006fr"`, `"\u0065rror"`,
		`"MESSAGE"`, `"messagE"`, `"@TYPE"`, `"@typ"`, `"quotaid"`, `"QUOTAID"`, `"\u212a"`, "\"\u212a\"", "\"\u017f\"",
		`"reason\u0000"`, `"re\"ason"`, `""`, "\"r\xffason\"", `"K"`, `"S"`, `"[rror"`, `"{rror"`}
	for _, k := range keys {
		for _, n := range names {
			want := strings.EqualFold(unquote(k), n)
			require.Equal(t, want, keyIs(k, n), "keyIs(%s, %q)", k, n)
			require.Equal(t, want, keyIs(memberKey(k), n), "keyIs(memberKey(%s), %q)", k, n)
		}
	}
}
