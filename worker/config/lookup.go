package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNotDefined is wrapped by the lookup errors of Pipeline, Model, Key and
// KeyFor.
var ErrNotDefined = errors.New("not defined")

// Pipeline returns the [[pipelines]] entry called name. The pointer refers
// into c; do not modify it.
func (c *Config) Pipeline(name string) (*Pipeline, error) {
	for i := range c.Pipelines {
		if c.Pipelines[i].Name == name {
			return &c.Pipelines[i], nil
		}
	}
	names := make([]string, len(c.Pipelines))
	for i, p := range c.Pipelines {
		names[i] = p.Name
	}
	return nil, notDefined(c, "pipeline", name, "[[pipelines]]", names)
}

// Model returns the [[models]] entry called name. The pointer refers into c;
// do not modify it.
func (c *Config) Model(name string) (*Model, error) {
	for i := range c.Models {
		if c.Models[i].Name == name {
			return &c.Models[i], nil
		}
	}
	names := make([]string, len(c.Models))
	for i, m := range c.Models {
		names[i] = m.Name
	}
	return nil, notDefined(c, "model", name, "[[models]]", names)
}

// Key returns the [[keys]] entry called name. The pointer refers into c; do
// not modify it.
func (c *Config) Key(name string) (*Key, error) {
	for i := range c.Keys {
		if c.Keys[i].Name == name {
			return &c.Keys[i], nil
		}
	}
	names := make([]string, len(c.Keys))
	for i, k := range c.Keys {
		names[i] = k.Name
	}
	return nil, notDefined(c, "key", name, "[[keys]]", names)
}

// KeyFor returns the key and model that serve the pipeline called pipeline
// (pipeline -> model -> key).
func (c *Config) KeyFor(pipeline string) (*Key, *Model, error) {
	p, err := c.Pipeline(pipeline)
	if err != nil {
		return nil, nil, err
	}
	m, err := c.Model(p.Model)
	if err != nil {
		return nil, nil, err
	}
	k, err := c.Key(m.Key)
	if err != nil {
		return nil, nil, err
	}
	return k, m, nil
}

func notDefined(c *Config, what, name, table string, names []string) error {
	have := "none"
	if len(names) > 0 {
		have = strings.Join(names, ", ")
	}
	return fmt.Errorf("%s: %s %q is %w in %s (defined: %s)", c.fileName(), what, name, ErrNotDefined, table, have)
}

// DatabaseURL returns the PostgreSQL URL to use: the DATABASE_URL environment
// variable when set and non-empty, else [database] url. "" means the private
// local cluster (docs/design.md, "The embedded default and the fake provider"). getenv is os.Getenv when
// nil.
func (c *Config) DatabaseURL(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if u := strings.TrimSpace(getenv(EnvDatabaseURL)); u != "" {
		return u
	}
	return c.Database.URL
}

// ErrAPIKeyUnset is wrapped by Key.APIKey when the variable is unset or empty.
var ErrAPIKeyUnset = errors.New("API key environment variable is not set")

// APIKey reads the key's API key from the environment variable named by
// APIKeyEnv, trimming surrounding white space. getenv is os.Getenv when nil.
// The error names the variable, never a value.
func (k *Key) APIKey(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if k.APIKeyEnv == "" {
		return "", fmt.Errorf("key %q: api_key_env is empty: %w", k.Name, ErrAPIKeyUnset)
	}
	v := strings.TrimSpace(getenv(k.APIKeyEnv))
	if v == "" {
		return "", fmt.Errorf("key %q: %w: set %s (named by api_key_env)", k.Name, ErrAPIKeyUnset, k.APIKeyEnv)
	}
	return v, nil
}

// String describes the key for logs: name, vendor, path, base URL (without
// credentials or query) and the variable name. It never contains the API key.
func (k Key) String() string {
	return fmt.Sprintf("key %q (vendor=%s path=%s base_url=%s api_key_env=%s)",
		k.Name, k.Vendor, k.Path, redactURL(k.BaseURL), k.APIKeyEnv)
}
