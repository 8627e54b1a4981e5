package worker

import (
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
)

// wireFormat is the provider format a key's format setting names ("": the
// vendor's).
func wireFormat(k *config.Key) provider.Format {
	if k.Format == config.FormatResponses {
		return provider.FormatResponses
	}
	return ""
}
