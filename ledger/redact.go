package ledger

import "github.com/triage-dev/triage/ledger/redact"

// ExcerptMaxBytes is the longest string Redact returns, before its "…".
const ExcerptMaxBytes = redact.ExcerptMaxBytes

// Redact removes strings that look like credentials from s, escapes control
// characters and bounds it to ExcerptMaxBytes (redact.Boundary.Excerpt with
// no exact key). The worker passes provider text through its key's
// redact.Boundary before it gets here; this is the ledger's own backstop for
// every dead letter.
func Redact(s string) string { return redact.Boundary{}.Excerpt(s) }
