package worker

import (
	"fmt"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/provider"
)

// CheckCallable says why the pipeline's records could not be called from
// here, before anything is enqueued: the pipeline, its model and its key
// must be defined, the key's API key variable set, and its vendor spoken by
// a client. Errors name the setting, never the key's value.
func CheckCallable(cfg *config.Config, pipeline string, getenv func(string) string) error {
	if _, err := cfg.Pipeline(pipeline); err != nil {
		return err
	}
	k, _, err := cfg.KeyFor(pipeline)
	if err != nil {
		return err
	}
	apiKey, err := k.APIKey(getenv)
	if err != nil {
		return err
	}
	if _, err := provider.New(provider.Options{Vendor: k.Vendor, Format: wireFormat(k), Path: k.Path, BaseURL: k.BaseURL, APIKey: apiKey}); err != nil {
		return fmt.Errorf("key %q: %w", k.Name, err)
	}
	return nil
}
