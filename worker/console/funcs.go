package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/operator"
)

var funcs = template.FuncMap{
	"usd":   func(v float64) string { return fmt.Sprintf("$%.4f", v) },
	"share": share,
	"deref": func(p any) any {
		switch v := p.(type) {
		case *float64:
			return *v
		case *string:
			return *v
		case *int:
			return *v
		}
		return p
	},
	"derefTime":   func(t *time.Time) time.Time { return *t },
	"stamp":       func(t time.Time) string { return t.Local().Format(time.DateTime) },
	"join":        strings.Join,
	"classNote":   classNote,
	"workers":     func(a *operator.Activity, key string) string { return operator.DescribeWorkers(*a, key) },
	"jobs":        func(a *operator.Activity) string { return operator.DescribeJobs(*a) },
	"plural":      plural,
	"resolution":  func(r ledger.Resolution) string { return operator.DescribeResolution(r) },
	"lostAnswers": func(l *ledger.LostAnswers) string { return operator.DescribeLostAnswers(*l) },
	"pretty":      pretty,
	"filterURL": func(batch, class, reason string) string {
		return "/dead-letters?" + query(batch, class, reason).Encode()
	},
	"requeueGroupURL": func(batch, class, reason string) string {
		return "/dead-letters/requeue?" + query(batch, class, reason).Encode()
	},
}

func query(batch, class, reason string) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"batch": batch, "class": class, "reason": reason} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// share is n as a percentage of total, for the progress bar's widths.
func share(n, total int) string {
	if total <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.2f", float64(n)*100/float64(total))
}

// pretty indents JSON for a <pre>; anything else is shown as it is.
func pretty(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return "(none)"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") == nil {
		return b.String()
	}
	return string(raw)
}

// classNote explains a dead letter's class where the name alone misleads:
// a dead letter of class ok was answered (and billed), but the answer was
// not usable, which is no success.
func classNote(class string) string {
	if class == classify.OK.String() {
		return "not a success: the provider answered (the call is billed), but the answer was unusable (see the reason)"
	}
	return ""
}

// plural is "1 record", "3 records".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
