package enqueue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/triage-dev/triage/ledger/redact"
)

// BatchIDMaxBytes is the longest batch id: ids are printed in tables,
// progress lines and commands to copy; a longer one is a mistake.
const BatchIDMaxBytes = 128

// ErrBadName is wrapped by the errors of CheckBatchID and of a record id
// that cannot be stored and printed safely.
var ErrBadName = errors.New("not a usable name")

// CheckBatchID says why id cannot name a batch: empty, longer than
// BatchIDMaxBytes, not UTF-8, or holding a control character (NUL, ESC, a
// new line), which would reach operators' terminals and the provider's
// request headers.
func CheckBatchID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return fmt.Errorf("batch id is empty: %w", ErrBadName)
	case len(id) > BatchIDMaxBytes:
		return fmt.Errorf("batch id is %d bytes long, more than %d: %w", len(id), BatchIDMaxBytes, ErrBadName)
	}
	return checkPrintable("batch id", id)
}

func checkPrintable(what, s string) error {
	if redact.Escape(s, false) != s || redact.HasControl(s) {
		return fmt.Errorf("%s %s holds a control character or invalid UTF-8: %w", what, redact.Escape(fmt.Sprintf("%q", s), false), ErrBadName)
	}
	return nil
}

// nulEscape is how a NUL appears inside a JSON string.
var nulEscape = []byte(`\u0000`)

// checkNoNUL refuses a record whose strings hold a NUL, which PostgreSQL's
// jsonb cannot store. The quick byte test keeps the common case free.
func checkNoNUL(b []byte) error {
	if !bytes.Contains(b, nulEscape) {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil // reported as invalid JSON elsewhere
	}
	if hasNUL(v) {
		return errors.New(`a string holds \u0000 (NUL), which PostgreSQL cannot store: remove it`)
	}
	return nil
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 || hasNUL(e) {
				return true
			}
		}
	}
	return false
}
