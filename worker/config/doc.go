// Package config parses and validates triage.toml, the file that names the
// database, the alert targets, the API keys (one River queue and one breaker
// per key), the models and the pipelines (docs/design.md, "Configuration").
//
// Load and Parse return a Config with defaults filled in and every field
// validated; an error names the file, the table, the element and the field, as
// in
//
//	triage.toml: pipelines[1] "enrich": model "gpt-5" is not defined in [[models]]
//
// Unknown keys are errors too, so a misspelt option is never silently ignored.
//
// API keys are never stored in the file: a [[keys]] entry names the
// environment variable that holds the key (api_key_env) and Key.APIKey reads it.
// Neither the key value nor anything derived from it appears in an error or in
// a String method. DATABASE_URL in the environment overrides [database] url
// (Config.DatabaseURL).
package config
